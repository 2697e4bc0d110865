set -e
cd /app
git init -q -b main .
echo base > base.txt
git add -A && git commit -q -m 'Base'
git checkout -q -b topic
echo 'step 1' >> parser.py
git add -A && git commit -q -m 'P1'
echo 'step 2' >> parser.py
git add -A && git commit -q -m 'P2'
echo 'step 3' >> parser.py
git add -A && git commit -q -m 'P3'
echo 'step 4' >> parser.py
git add -A && git commit -q -m 'P4'
git checkout -q main
