#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp -d); mkdir -p $t/sub; head -c 500 /dev/zero > $t/a; head -c 2000 /dev/zero > $t/sub/b; head -c 10 /dev/zero > $t/c
[ "$(timeout 10 bash large.sh $t 100 2>/dev/null)" = "$(printf '2000 sub/b\n500 a')" ] || fail "wrong listing"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
