#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp -d); timeout 20 make -s install DESTDIR=$t PREFIX=/opt/g >/dev/null 2>&1 || fail "make install failed"
[ -x $t/opt/g/bin/greet ] && [ "$($t/opt/g/bin/greet)" = hi ] || fail "not installed under DESTDIR/PREFIX"
u=$(mktemp -d); timeout 20 make -s install DESTDIR=$u >/dev/null 2>&1; [ -x $u/usr/local/bin/greet ] || fail "PREFIX default wrong"
[ "$(timeout 20 make -s all 2>/dev/null)" = "nothing to build" ] || fail "all target changed"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
