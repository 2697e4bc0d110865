#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp -d); echo '{"a":1,"n":{"x":1,"y":[1,2]},"k":"v"}' > $t/a.json; echo '{"a":2,"n":{"y":[3],"z":true}}' > $t/b.json
out=$(timeout 10 bash merge.sh $t/a.json $t/b.json 2>/dev/null); [ -n "$out" ] && printf '%s' "$out" | jq -e '. == {"a":2,"n":{"x":1,"y":[3],"z":true},"k":"v"}' >/dev/null || fail "wrong merge"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
