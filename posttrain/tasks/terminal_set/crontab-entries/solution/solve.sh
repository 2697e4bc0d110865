#!/bin/bash
printf '30 2 * * * /app/backup.sh\n0 9 * * 1 /app/report.sh\n' > crontab
