#!/bin/bash
errors=0
cat "$1" | while read -r line; do
  case "$line" in *ERROR*) errors=$((errors+1));; esac
done
[ $errors -eq 0 ]
