#!/bin/bash
awk '{print $9}' access.log | sort | uniq -c | awk '{print $2, $1}' | sort -n > report.txt
# ---
cat report.txt
