#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp -d); tar -xzf dist/tool-1.0.tar.gz -C $t 2>/dev/null || fail "not a gzip tarball"
[ "$(cd $t && find . -type f | sort | tr '\n' ' ')" = "./tool-1.0/LICENSE ./tool-1.0/README ./tool-1.0/bin/tool " ] || fail "wrong contents"
[ -x $t/tool-1.0/bin/tool ] && [ "$($t/tool-1.0/bin/tool)" = "tool 1.0" ] || fail "bin/tool not executable or wrong"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
