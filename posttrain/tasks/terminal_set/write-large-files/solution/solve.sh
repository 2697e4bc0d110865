#!/bin/bash
cat > large.sh <<'EOF'
#!/bin/bash
cd "$1" && find . -type f -size +"$2"c -printf '%s %P\n' | sort -rn
EOF
