#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp); printf 'The cat; the DOG.\nA cat, a dog? the end\n' > $t
[ "$(timeout 10 bash wordfreq.sh 3 $t 2>/dev/null)" = "$(printf '3 the\n2 a\n2 cat')" ] || fail "wrong top 3"
[ "$(timeout 10 bash wordfreq.sh 1 $t 2>/dev/null)" = "3 the" ] || fail "wrong top 1"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
