#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp); printf 'ok\nan ERROR here\nok\n' > $t; timeout 10 bash /app/check.sh $t >/dev/null 2>&1; [ $? -eq 1 ] || fail "ERROR file not flagged"
printf 'ok\nfine\n' > $t; timeout 10 bash /app/check.sh $t >/dev/null 2>&1 || fail "clean file flagged"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
