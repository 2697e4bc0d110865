#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
[ -z "$(git ls-files | grep -E '^build/|\.log$')" ] || fail "artifacts still tracked"
[ -f build/out.bin ] && [ -f debug.log ] || fail "files removed from disk"
git check-ignore -q build/new.o && git check-ignore -q x/y.log || fail ".gitignore does not ignore them"
git ls-files --error-unmatch .gitignore >/dev/null 2>&1 || fail ".gitignore not committed"
[ -z "$(git status --porcelain)" ] || fail "working tree not clean"
git cat-file -e HEAD:src.py 2>/dev/null || fail "src.py lost"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
