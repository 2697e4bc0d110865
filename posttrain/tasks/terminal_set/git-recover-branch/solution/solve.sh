#!/bin/bash
git reflog | head -5
# ---
git branch recovered $(git reflog --format='%H %gs' | grep -m1 'Add feature' | cut -d' ' -f1 || true)
git rev-parse recovered >/dev/null 2>&1 || git branch recovered $(git fsck --lost-found 2>/dev/null | awk '/commit/{print $3}' | head -1)
