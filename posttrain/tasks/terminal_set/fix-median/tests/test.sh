#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
for case in "5 1 9 3:4.0" "7:7.0" "10 2 8 4 6 12:7.0" "1 2:1.5" "-3 -1 -2:-2.0"; do
  xs=${case%%:*}; want=${case##*:}
  got=$(cd /app && timeout 10 python3 -c "from stats import median; print(float(median([$(echo $xs | tr ' ' ',')])))" 2>/dev/null)
  [ "$got" = "$want" ] || fail "median($xs) = $got, want $want"
done
echo $ok > /logs/verifier/reward.txt  # the reward is written last
