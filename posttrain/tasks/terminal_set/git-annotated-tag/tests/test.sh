#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(git cat-file -t v1.2.0 2>/dev/null)" = tag ] || fail "v1.2.0 is not an annotated tag"
[ "$(git rev-parse 'v1.2.0^{commit}' 2>/dev/null)" = "c2146672593720ccfab89ad225e4dfbf21f05b99" ] || fail "tag on wrong commit"
git cat-file -p v1.2.0 2>/dev/null | grep -qx 'Release 1.2.0' || fail "wrong tag message"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
