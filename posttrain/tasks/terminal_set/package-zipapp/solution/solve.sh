#!/bin/bash
s=$(mktemp -d) && cp -r calc $s/ && mkdir -p dist && python3 -m zipapp $s -m calc.cli:main -o dist/app.pyz -p '/usr/bin/env python3'
# ---
python3 dist/app.pyz 3 4
