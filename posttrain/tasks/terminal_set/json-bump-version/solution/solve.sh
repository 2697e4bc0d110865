#!/bin/bash
jq --indent 2 '.version = "2.0.0" | .scripts.test = "pytest -q"' package.json > p.tmp && mv p.tmp package.json
# ---
cat package.json
