#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
git merge-base --is-ancestor 25a1610b22d994c65d1e37d8170c3516ba382679 main 2>/dev/null || fail "history rewritten"
[ "$(git rev-parse main)" != "25a1610b22d994c65d1e37d8170c3516ba382679" ] || fail "no new commit"
[ "$(git show main:greet.txt 2>/dev/null)" = "hello world" ] || fail "greet.txt not restored"
[ "$(git show main:later.txt 2>/dev/null)" = "later" ] || fail "later work lost"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
