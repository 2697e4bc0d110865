#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp -d); printf 'x;10\ny;2.5\n' > $t/s.csv; printf 'x,1\ny,2\n' > $t/c.csv
[ "$(timeout 10 python3 totals.py $t/s.csv --sep ';' 2>/dev/null)" = 12.50 ] || fail "--sep ; wrong"
[ "$(timeout 10 python3 totals.py $t/c.csv 2>/dev/null)" = 3.00 ] || fail "default separator wrong"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
