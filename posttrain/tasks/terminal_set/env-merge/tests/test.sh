#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
for kv in DB_HOST=db.prod DB_PORT=5432 LOG_LEVEL=warn CACHE=off; do [ "$(grep -c "^${kv%%=*}=" .env)" = 1 ] && grep -qx "$kv" .env || fail "$kv"; done
echo $ok > /logs/verifier/reward.txt  # the reward is written last
