#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
t=$(mktemp); printf '1.1.1.1 a\n2.2.2.2 b\n1.1.1.1 c\n3.3.3.3 d\n2.2.2.2 e\n1.1.1.1 f\n9.9.9.9 g\n' > $t
[ "$(timeout 10 bash top_ips.sh $t 2 2>/dev/null)" = "$(printf '3 1.1.1.1\n2 2.2.2.2')" ] || fail "wrong top 2"
[ "$(timeout 10 bash top_ips.sh $t 4 2>/dev/null | tail -2)" = "$(printf '1 3.3.3.3\n1 9.9.9.9')" ] || fail "ties not by IP"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
