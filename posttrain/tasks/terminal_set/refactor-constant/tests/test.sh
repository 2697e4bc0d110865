#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(timeout 10 python3 receipt.py 2>/dev/null)" = "net 50.0 tax 10.0 gross 60.0" ] || fail "output changed"
grep -q '0\.2' pricing.py receipt.py && fail "literal 0.2 still present"
sed -i 's/^TAX_RATE *= *0\.2/TAX_RATE = 0.5/' settings.py 2>/dev/null
[ "$(timeout 10 python3 receipt.py 2>/dev/null)" = "net 50.0 tax 25.0 gross 75.0" ] || fail "TAX_RATE in settings.py is not what both files use"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
