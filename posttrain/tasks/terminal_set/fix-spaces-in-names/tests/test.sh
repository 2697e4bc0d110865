#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp -d); mkdir -p "$t/in dir"; echo 1 > "$t/in dir/a b.txt"; echo 2 > "$t/in dir/c.txt"; echo 3 > "$t/in dir/skip.md"
timeout 10 bash /app/backup.sh "$t/in dir" "$t/out dir" >/dev/null 2>&1
[ "$(cat "$t/out dir/a b.txt" 2>/dev/null)" = 1 ] || fail "a b.txt not copied"
[ "$(cat "$t/out dir/c.txt" 2>/dev/null)" = 2 ] || fail "c.txt not copied"
[ ! -e "$t/out dir/skip.md" ] || fail "copied a non-.txt file"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
