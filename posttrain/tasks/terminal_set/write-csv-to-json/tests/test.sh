#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp); printf 'id,name,qty\n7,bolt,12\nx9,"nut, small",3\n' > $t
out=$(timeout 10 python3 csv2json.py $t 2>/dev/null); [ -n "$out" ] && printf '%s' "$out" | jq -e '. == [{"id":7,"name":"bolt","qty":12},{"id":"x9","name":"nut, small","qty":3}]' >/dev/null || fail "wrong JSON"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
