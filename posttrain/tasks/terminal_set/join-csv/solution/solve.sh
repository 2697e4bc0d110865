#!/bin/bash
python3 - <<'EOF'
import csv
names = {r['id']: r['name'] for r in csv.DictReader(open('customers.csv'))}
tot = {}
for r in csv.DictReader(open('orders.csv')):
    n = names[r['customer']]
    tot[n] = tot.get(n, 0) + float(r['amount'])
with open('totals.csv', 'w') as f:
    f.write('name,total\n')
    for n, t in sorted(tot.items(), key=lambda kv: -kv[1]):
        f.write(f'{n},{t:.2f}\n')
EOF
# ---
cat totals.csv
