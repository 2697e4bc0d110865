set -e
cd /app
git init -q -b main .
printf '[app]\nname = x\n' > config.ini
git add -A && git commit -q -m 'Base'
git checkout -q -b feature
printf '[app]\nretries = 5\n' > config.ini
git add -A && git commit -q -m 'Feature retries'
git checkout -q main
printf '[app]\ntimeout = 30\n' > config.ini
git add -A && git commit -q -m 'Main timeout'
