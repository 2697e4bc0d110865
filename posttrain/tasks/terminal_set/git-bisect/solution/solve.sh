#!/bin/bash
git bisect start main $(git rev-list --max-parents=0 main) >/dev/null
git bisect run sh check.sh > /tmp/bisect.log 2>&1
git rev-parse refs/bisect/bad > bad_commit.txt
git bisect reset >/dev/null 2>&1
# ---
cat bad_commit.txt
