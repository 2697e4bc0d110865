#!/bin/bash
sed -i 's/"b",]/"b"]/; s/\],$/]/' config.json
# ---
python3 app.py
