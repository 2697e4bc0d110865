#!/bin/bash
git checkout -q main && git cherry-pick $(git log --format='%H %s' dev | grep 'Fix rounding' | cut -d' ' -f1)
