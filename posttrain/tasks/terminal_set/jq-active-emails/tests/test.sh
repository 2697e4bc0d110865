#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(cat emails.txt 2>/dev/null)" = "$(jq -r '.[] | select(.active) | .email' /tests/users.json | sort)" ] || fail "emails.txt wrong"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
