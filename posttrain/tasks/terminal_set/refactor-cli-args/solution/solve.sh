#!/bin/bash
cat > totals.py <<'EOF'
import argparse
ap = argparse.ArgumentParser()
ap.add_argument('path')
ap.add_argument('--sep', default=',')
a = ap.parse_args()
total = 0.0
for line in open(a.path):
    if line.strip():
        total += float(line.split(a.sep)[1])
print(f'{total:.2f}')
EOF
