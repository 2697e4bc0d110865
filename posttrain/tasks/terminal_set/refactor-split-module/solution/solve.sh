#!/bin/bash
python3 - <<'EOF'
src = open('big.py').read()
cls, rest = src.split('\n\n\ninv = ')
open('inventory.py', 'w').write(cls + '\n')
open('big.py', 'w').write('from inventory import Inventory\n\ninv = ' + rest)
EOF
# ---
python3 big.py
