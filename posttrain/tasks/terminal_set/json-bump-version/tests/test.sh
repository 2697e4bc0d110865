#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
jq -e '.version=="2.0.0" and .scripts.test=="pytest -q" and .scripts.build=="make" and .name=="widget" and .license=="MIT" and (keys|length)==4' package.json >/dev/null 2>&1 || fail "fields wrong"
grep -q '^  "version": "2.0.0"' package.json || fail "not 2-space indented"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
