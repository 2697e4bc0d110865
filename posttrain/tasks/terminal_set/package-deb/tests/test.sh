#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
d=dist/hello-pt_1.0_all.deb
[ "$(dpkg-deb -f $d Package Version Architecture 2>/dev/null | tr '\n' ' ')" = "Package: hello-pt Version: 1.0 Architecture: all " ] || fail "control fields wrong"
t=$(mktemp -d); dpkg-deb -x $d $t 2>/dev/null || fail "cannot unpack"
[ -x $t/usr/local/bin/hello-pt ] && [ "$($t/usr/local/bin/hello-pt)" = "hello from pt" ] || fail "script missing or wrong"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
