set -e
cd /app
git init -q -b main .
printf '#!/bin/sh\npython3 -c "from calc import double; assert double(7) == 14"\n' > check.sh
printf 'def double(x):\n    # revision 1\n    return x * 2\n' > calc.py
git add -A && git commit -q -m 'change 1'
printf 'def double(x):\n    # revision 2\n    return x * 2\n' > calc.py
git add -A && git commit -q -m 'change 2'
printf 'def double(x):\n    # revision 3\n    return x * 2\n' > calc.py
git add -A && git commit -q -m 'change 3'
printf 'def double(x):\n    # revision 4\n    return x * 2\n' > calc.py
git add -A && git commit -q -m 'change 4'
printf 'def double(x):\n    # revision 5\n    return x * 2\n' > calc.py
git add -A && git commit -q -m 'change 5'
printf 'def double(x):\n    # revision 6\n    return x * 2\n' > calc.py
git add -A && git commit -q -m 'change 6'
printf 'def double(x):\n    # revision 7\n    return x * 2\n' > calc.py
git add -A && git commit -q -m 'change 7'
printf 'def double(x):\n    # revision 8\n    return x * 2\n' > calc.py
git add -A && git commit -q -m 'change 8'
printf 'def double(x):\n    # revision 9\n    return x * 2\n' > calc.py
git add -A && git commit -q -m 'change 9'
printf 'def double(x):\n    # revision 10\n    return x * 2\n' > calc.py
git add -A && git commit -q -m 'change 10'
printf 'def double(x):\n    # revision 11\n    return x * 2 + (x > 5)\n' > calc.py
git add -A && git commit -q -m 'change 11'
printf 'def double(x):\n    # revision 12\n    return x * 2 + (x > 5)\n' > calc.py
git add -A && git commit -q -m 'change 12'
printf 'def double(x):\n    # revision 13\n    return x * 2 + (x > 5)\n' > calc.py
git add -A && git commit -q -m 'change 13'
printf 'def double(x):\n    # revision 14\n    return x * 2 + (x > 5)\n' > calc.py
git add -A && git commit -q -m 'change 14'
printf 'def double(x):\n    # revision 15\n    return x * 2 + (x > 5)\n' > calc.py
git add -A && git commit -q -m 'change 15'
printf 'def double(x):\n    # revision 16\n    return x * 2 + (x > 5)\n' > calc.py
git add -A && git commit -q -m 'change 16'
