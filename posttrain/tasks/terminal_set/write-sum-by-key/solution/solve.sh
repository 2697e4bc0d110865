#!/bin/bash
cat > sumkey.sh <<'EOF'
#!/bin/bash
awk '{s[$1]+=$2} END {for (k in s) print k, s[k]}' "$1" | sort
EOF
