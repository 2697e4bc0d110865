#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
printf 'x y z x y\nq\n' > data.txt
timeout 20 make clean >/dev/null 2>&1
timeout 20 make >/dev/null 2>&1 || fail "make failed"
[ "$(cat out/report.txt 2>/dev/null)" = "words=6 unique=4" ] || fail "wrong report"
timeout 20 make clean >/dev/null 2>&1; [ ! -e out ] || fail "make clean left out/"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
