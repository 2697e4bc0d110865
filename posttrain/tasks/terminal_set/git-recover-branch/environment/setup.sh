set -e
cd /app
git init -q -b main .
echo base > base.txt
git add -A && git commit -q -m 'Base'
git checkout -q -b feature
echo 'print(42)' > feature.py
git add -A && git commit -q -m 'Add feature'
git checkout -q main
echo more >> base.txt
git add -A && git commit -q -m 'More base'
git branch -D feature >/dev/null
