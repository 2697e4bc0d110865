#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
for n in 3 7 10; do
  want=$(python3 -I -c "print(round($n*4.5,2))")
  got=$(cd /app && timeout 10 python3 -m shop.main $n 2>/dev/null)
  [ "$got" = "$want" ] || fail "shop.main $n printed '$got', want $want"
done
echo $ok > /logs/verifier/reward.txt  # the reward is written last
