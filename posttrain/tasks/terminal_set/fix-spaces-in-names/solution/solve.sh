#!/bin/bash
cat > backup.sh <<'EOF'
#!/bin/bash
mkdir -p "$2"
for f in "$1"/*.txt; do
  [ -e "$f" ] || continue
  cp "$f" "$2"/
done
EOF
