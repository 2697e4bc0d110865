#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
c=$(cat server.conf 2>/dev/null)
echo "$c" | grep -Eq '^\s*listen 8081;' || fail "listen not 8081"; echo "$c" | grep -q 'listen 8080' && fail "old listen kept"
echo "$c" | grep -q 'server_tokens' && fail "server_tokens kept"
python3 -I -c "
import re,sys; t=open('server.conf').read(); m=re.search(r'http \{(.*)\}\s*$', t, re.S)
sys.exit(0 if m and re.search(r'^\s*gzip on;', m.group(1), re.M) and 'root /srv/www;' in t and '# server config' in t else 1)" || fail "gzip not in http block or content lost"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
