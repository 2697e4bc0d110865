#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
jq -e --slurpfile w <(jq -s 'group_by(.type) | map({(.[0].type): length}) | add' /tests/events.jsonl) '. == $w[0]' stats.json >/dev/null 2>&1 || fail "stats.json wrong"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
