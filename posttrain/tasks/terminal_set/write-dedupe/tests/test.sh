#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(printf 'b\na\nb\nc\na\n' | timeout 10 bash dedupe.sh 2>/dev/null)" = "$(printf 'b\na\nc')" ] || fail "wrong output"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
