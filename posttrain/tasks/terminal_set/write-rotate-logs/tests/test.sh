#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp -d); for d in 2024-01-05 2023-12-31 2024-02-01 2024-01-20; do echo x > $t/app-$d.log; done; echo k > $t/keep.txt
timeout 10 bash rotate.sh $t 2 >/dev/null 2>&1
[ "$(ls $t | tr '\n' ' ')" = "app-2024-01-20.log app-2024-02-01.log keep.txt " ] || fail "wrong files left: $(ls $t | tr '\n' ' ')"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
