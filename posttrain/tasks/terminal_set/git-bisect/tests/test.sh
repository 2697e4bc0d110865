#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(tr -d ' \n' < bad_commit.txt 2>/dev/null)" = "895c96f704ecbe740f7a1302e3a8f5511a1d216b" ] || fail "wrong commit"
[ "$(git rev-parse main 2>/dev/null)" = "e99d04dd3c37a844999e95460606de80745922c2" ] || fail "history changed"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
