#!/bin/bash
git checkout -q feature && git rebase -q main
# ---
git log --oneline --graph | head
