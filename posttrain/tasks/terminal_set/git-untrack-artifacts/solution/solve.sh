#!/bin/bash
git rm -r -q --cached build '*.log'
printf 'build/\n*.log\n' > .gitignore
git add .gitignore && git commit -q -m 'Stop tracking build output'
# ---
git status --short
