#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
[ "$(printf 'mail ann.b+x@ex-1.org now\nno mail\na@b.io,c_d@e.com\n' | timeout 10 bash redact.sh 2>/dev/null)" = "$(printf 'mail [REDACTED] now\nno mail\n[REDACTED],[REDACTED]')" ] || fail "wrong redaction"
echo $ok > /logs/verifier/reward.txt  # the reward is written last
