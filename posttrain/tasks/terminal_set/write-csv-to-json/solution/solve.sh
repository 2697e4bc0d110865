#!/bin/bash
cat > csv2json.py <<'EOF'
import csv, json, sys

def conv(v):
    try:
        return int(v)
    except ValueError:
        return v

with open(sys.argv[1], newline='') as f:
    rows = [{k: conv(v) for k, v in r.items()} for r in csv.DictReader(f)]
print(json.dumps(rows))
EOF
