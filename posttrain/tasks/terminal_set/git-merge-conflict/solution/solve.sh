#!/bin/bash
git merge feature || true
# ---
printf '[app]\ntimeout = 30\nretries = 5\n' > config.ini
git add config.ini && git commit -q --no-edit
