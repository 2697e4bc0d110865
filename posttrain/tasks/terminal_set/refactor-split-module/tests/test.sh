#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(timeout 10 python3 big.py 2>/dev/null)" = "{'bolt': 4, 'nut': 4} 8" ] || fail "output changed"
grep -q '^class Inventory' big.py && fail "Inventory still defined in big.py"
grep -q '^class Inventory' inventory.py 2>/dev/null || fail "inventory.py does not define Inventory"
grep -Eq '^from inventory import Inventory|^import inventory' big.py || fail "big.py does not import inventory"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
