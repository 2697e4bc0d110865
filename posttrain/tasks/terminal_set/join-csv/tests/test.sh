#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
want=$(python3 -I - <<'EOF'
import csv
names = {r["id"]: r["name"] for r in csv.DictReader(open("/tests/customers.csv"))}
tot = {}
for r in csv.DictReader(open("/tests/orders.csv")):
    tot[names[r["customer"]]] = tot.get(names[r["customer"]], 0) + float(r["amount"])
print("name,total")
for n, t in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"{n},{t:.2f}")
EOF
)
[ "$(cat totals.csv 2>/dev/null)" = "$want" ] || fail "totals.csv wrong"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
