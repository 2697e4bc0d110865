#!/bin/bash
cat > valid_ips.py <<'EOF'
import re, sys
PART = r'(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])'
RX = re.compile(r'^' + r'\.'.join([PART] * 4) + r'$')
for line in sys.stdin:
    line = line.rstrip('\n')
    if RX.match(line):
        print(line)
EOF
