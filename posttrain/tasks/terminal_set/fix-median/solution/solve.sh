#!/bin/bash
cat > stats.py <<'EOF'
def median(xs):
    s = sorted(xs)
    n = len(s)
    if n % 2:
        return s[n // 2]
    return (s[n // 2 - 1] + s[n // 2]) / 2
EOF
# ---
python3 test_stats.py
