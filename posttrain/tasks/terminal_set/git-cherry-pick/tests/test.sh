#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
git merge-base --is-ancestor 43b8d2aa26dae4e44ce2983f344cc8391b87b88b main 2>/dev/null || fail "main lost its history"
[ "$(git show main:money.py 2>/dev/null)" = "def cents(x):
    return round(x * 100)" ] || fail "fix not on main"
git cat-file -e main:exp.py 2>/dev/null && fail "exp.py must not be on main"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
