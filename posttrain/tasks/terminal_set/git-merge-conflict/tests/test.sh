#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(git rev-parse main^2 2>/dev/null)" = "ad87afda019cb39f070cd3cf81ddeea6ce882077" ] || fail "main is not a merge of feature"
[ "$(git rev-parse main^1 2>/dev/null)" = "9b5d197e8d276d76540e4dab5d87971b884964d4" ] || fail "first parent is not the old main"
c=$(git show main:config.ini 2>/dev/null)
echo "$c" | grep -qx 'timeout = 30' || fail "timeout lost"; echo "$c" | grep -qx 'retries = 5' || fail "retries lost"
echo "$c" | grep -qx '\[app\]' || fail "header lost"; echo "$c" | grep -q '^[<>=]\{7\}' && fail "conflict markers left"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
