#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
want=$(printf 'hour,count\n'; grep ' ERROR ' /tests/app.log | cut -c1-13 | sort | uniq -c | awk '{print $2 "," $1}')
[ "$(cat errors_by_hour.csv 2>/dev/null)" = "$want" ] || fail "errors_by_hour.csv wrong"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
