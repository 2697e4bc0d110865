#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
in=$(printf '10.0.0.1\n256.1.1.1\n1.2.3\n01.2.3.4\n0.0.0.0\n192.168.1.254 \nabc\n255.255.255.255\n')
[ "$(printf '%s\n' "$in" | timeout 10 python3 valid_ips.py 2>/dev/null)" = "$(printf '10.0.0.1\n0.0.0.0\n255.255.255.255')" ] || fail "wrong filter"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
