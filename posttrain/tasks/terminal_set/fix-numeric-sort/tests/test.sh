#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp); printf '9\n100\n25\n3\n1000\n42\n' > $t
[ "$(timeout 10 bash /app/biggest.sh $t 2>/dev/null | tr '\n' ' ')" = "1000 100 42 " ] || fail "wrong order"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
