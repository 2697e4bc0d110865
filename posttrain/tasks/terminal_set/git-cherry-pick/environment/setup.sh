set -e
cd /app
git init -q -b main .
printf 'def cents(x):\n    return int(x * 100)\n' > money.py
git add -A && git commit -q -m 'Base'
git checkout -q -b dev
echo 'FLAG = 1' > exp.py
git add -A && git commit -q -m 'Add experimental flag'
printf 'def cents(x):\n    return round(x * 100)\n' > money.py
git add -A && git commit -q -m 'Fix rounding'
git checkout -q main
