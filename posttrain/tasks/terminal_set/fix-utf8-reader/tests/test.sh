#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp); printf 'caf\xc3\xa9 \xe2\x82\xac\n' > $t
[ "$(timeout 10 python3 /app/count_chars.py $t 2>/dev/null)" = 7 ] || fail "wrong count for UTF-8 text"
printf 'abc' > $t; [ "$(timeout 10 python3 /app/count_chars.py $t 2>/dev/null)" = 3 ] || fail "wrong count for ASCII"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
