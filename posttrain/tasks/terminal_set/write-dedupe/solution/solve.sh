#!/bin/bash
cat > dedupe.sh <<'EOF'
#!/bin/bash
awk '!seen[$0]++'
EOF
