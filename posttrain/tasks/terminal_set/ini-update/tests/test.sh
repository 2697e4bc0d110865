#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
python3 -I -c "
import configparser,sys; c=configparser.ConfigParser(); c.read('settings.ini')
sys.exit(0 if c['database']['host']=='db.internal' and c['database']['port']=='5433' and c['app']['name']=='shop' and c['cache']['ttl']=='60' else 1)" 2>/dev/null || fail "values wrong"
grep -qx '; where the db lives' settings.ini && grep -qx '; app settings' settings.ini || fail "comments lost"
[ "$(wc -l < settings.ini)" = 11 ] || fail "lines added or removed"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
