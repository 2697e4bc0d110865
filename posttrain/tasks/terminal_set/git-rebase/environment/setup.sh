set -e
cd /app
git init -q -b main .
echo base > base.txt
git add -A && git commit -q -m 'Base'
git checkout -q -b feature
echo 1 > f1.txt
git add -A && git commit -q -m 'F1'
echo 2 > f2.txt
git add -A && git commit -q -m 'F2'
echo 3 > f3.txt
git add -A && git commit -q -m 'F3'
git checkout -q main
echo m > m.txt
git add -A && git commit -q -m 'Main work'
