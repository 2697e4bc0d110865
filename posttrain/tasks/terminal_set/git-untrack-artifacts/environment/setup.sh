set -e
cd /app
git init -q -b main .
mkdir -p build sub
echo src > src.py
echo bin > build/out.bin
echo log > debug.log
echo log2 > sub/run.log
git add -A && git commit -q -m 'Initial'
