set -e
cd /app
git init -q -b main .
echo 'hello world' > greet.txt
git add -A && git commit -q -m 'Base'
echo 'hell0 w0rld' > greet.txt
git add -A && git commit -q -m 'Break the greeting'
echo later > later.txt
git add -A && git commit -q -m 'Later work'
