#!/bin/bash
sed -i 's/^    /\t/' Makefile
# ---
make && cat out/report.txt
