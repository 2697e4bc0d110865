#!/bin/bash
cat > util.py <<'EOF'
def normalize(s):
    s = s.strip().lower()
    s = ' '.join(s.split())
    return s.replace('-', '_')
EOF
# ---
printf 'import sys\nfrom util import normalize\nfor line in sys.stdin:\n    print(normalize(line))\n' > clean_names.py
printf 'import sys\nfrom util import normalize\nfor line in sys.stdin:\n    print("#" + normalize(line))\n' > clean_tags.py
