#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(git rev-parse recovered 2>/dev/null)" = "c13b625d636cdd68504610c3cf83199401589328" ] || fail "recovered does not point at the lost commit"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
