#!/bin/bash
cat > check.sh <<'EOF'
#!/bin/bash
errors=0
while read -r line; do
  case "$line" in *ERROR*) errors=$((errors+1));; esac
done < "$1"
[ $errors -eq 0 ]
EOF
