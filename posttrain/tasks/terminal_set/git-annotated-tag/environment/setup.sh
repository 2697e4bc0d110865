set -e
cd /app
git init -q -b main .
echo 1.1.0 > VERSION
git add -A && git commit -q -m 'Bump version to 1.1.0'
echo fix1.1.0 >> CHANGES
git add -A && git commit -q -m 'Fixes after 1.1.0'
echo 1.2.0 > VERSION
git add -A && git commit -q -m 'Bump version to 1.2.0'
echo fix1.2.0 >> CHANGES
git add -A && git commit -q -m 'Fixes after 1.2.0'
echo 1.3.0 > VERSION
git add -A && git commit -q -m 'Bump version to 1.3.0'
echo fix1.3.0 >> CHANGES
git add -A && git commit -q -m 'Fixes after 1.3.0'
