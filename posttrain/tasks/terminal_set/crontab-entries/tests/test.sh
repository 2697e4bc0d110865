#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
python3 -I -c "
import sys
rows = sorted((l.split()[:5], ' '.join(l.split()[5:])) for l in open('crontab') if l.strip() and not l.startswith('#'))
want = [(['0', '9', '*', '*', d], '/app/report.sh') for d in ('1', 'mon', 'Mon', 'MON')]
ok = len(rows) == 2 and rows[0] == (['0', '9', '*', '*', rows[0][0][4]], '/app/report.sh') and rows[0] in want and rows[1] == (['30', '2', '*', '*', '*'], '/app/backup.sh')
sys.exit(0 if ok else 1)" 2>/dev/null || fail "crontab wrong"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
