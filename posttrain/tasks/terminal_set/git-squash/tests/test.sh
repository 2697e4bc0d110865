#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(git rev-parse main 2>/dev/null)" = "4439a520b2e81e58bbdd77b3ce7331cf37391085" ] || fail "main changed"
[ "$(git rev-list --count main..topic 2>/dev/null)" = 1 ] || fail "topic must be one commit over main"
[ "$(git log -1 --format=%s topic 2>/dev/null)" = "Add parser" ] || fail "wrong message"
[ "$(git rev-parse topic^{tree} 2>/dev/null)" = "279ff5022d22ec8839e4df89ed54e96523509cae" ] || fail "content changed"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
