#!/bin/bash
git checkout -q topic && git reset -q --soft main && git commit -q -m 'Add parser'
# ---
git log --oneline | head -3
