#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
jq -e '.name == "svc" and .port == 8080 and .debug == false and .tags == ["a","b"] and (keys|length) == 4' config.json >/dev/null 2>&1 || fail "config.json wrong or invalid"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
