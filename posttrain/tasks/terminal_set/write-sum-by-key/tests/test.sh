#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp); printf 'b 2\na 5\nb 3\nc -1\na 1\n' > $t
[ "$(timeout 10 bash sumkey.sh $t 2>/dev/null)" = "$(printf 'a 6\nb 5\nc -1')" ] || fail "wrong sums"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
