#!/bin/bash
# Runs after the episode on its final /app, from a read-only /tests the episode never saw.
ok=1
fail() { echo "FAIL: $*"; ok=0; }
cd /app 2>/dev/null || { echo 0 > /logs/verifier/reward.txt; exit 0; }
in=$(printf '  Foo-Bar   BAZ \nA-b\n')
[ "$(printf '%s\n' "$in" | timeout 10 python3 clean_names.py 2>/dev/null)" = "$(printf 'foo_bar baz\na_b')" ] || fail "clean_names output changed"
[ "$(printf '%s\n' "$in" | timeout 10 python3 clean_tags.py 2>/dev/null)" = "$(printf '#foo_bar baz\n#a_b')" ] || fail "clean_tags output changed"
[ "$(grep -l 'def normalize' *.py | tr '\n' ' ')" = "util.py " ] || fail "normalize must be defined once, in util.py"
for f in clean_names.py clean_tags.py; do grep -q "replace('-'" $f && fail "$f still has its own copy"; grep -q 'util' $f || fail "$f does not use util"; done
echo $ok > /logs/verifier/reward.txt  # the reward is written last
