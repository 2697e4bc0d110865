#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
want=$(awk '{print $9}' /tests/access.log | sort | uniq -c | awk '{print $2, $1}' | sort -n)
[ "$(cat report.txt 2>/dev/null)" = "$want" ] || fail "report.txt wrong"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
