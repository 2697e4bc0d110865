#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp -d); cp dist/app.pyz $t/ 2>/dev/null || fail "no dist/app.pyz"
[ "$(cd $t && timeout 10 python3 -I app.pyz 20 22 2>/dev/null)" = 42 ] || fail "app.pyz does not run standalone"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
