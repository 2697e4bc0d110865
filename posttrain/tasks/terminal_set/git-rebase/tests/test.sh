#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(git rev-parse main 2>/dev/null)" = "4b9df46cb3dfa88dc1d10fb11076749b18fd77ba" ] || fail "main changed"
[ "$(git merge-base main feature 2>/dev/null)" = "$(git rev-parse main)" ] || fail "feature is not on top of main"
[ "$(git rev-list --count main..feature 2>/dev/null)" = 3 ] || fail "feature must have exactly 3 commits over main"
[ "$(git rev-list --merges --count main..feature 2>/dev/null)" = 0 ] || fail "merge commit present"
[ "$(git log --format=%s main..feature | tr '\n' ',')" = "F3,F2,F1," ] || fail "commit subjects/order wrong"
for f in f1.txt f2.txt f3.txt m.txt; do git cat-file -e feature:$f 2>/dev/null || fail "feature lacks $f"; done
echo $ok > /logs/verifier/reward.txt  # the reward is written last
