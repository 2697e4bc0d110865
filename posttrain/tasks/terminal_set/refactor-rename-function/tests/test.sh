#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(timeout 10 python3 -m billing.report 2>/dev/null)" = "12.0 13.2" ] || fail "output changed"
grep -rqw --include='*.py' calc billing && fail "calc still present"  # sources only: a stale .pyc is not code
timeout 10 python3 -c "from billing.core import compute_total; assert compute_total([(1,2),(3,4)]) == 14" 2>/dev/null || fail "compute_total missing or wrong"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
