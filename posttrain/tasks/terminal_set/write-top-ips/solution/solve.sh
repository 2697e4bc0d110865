#!/bin/bash
cat > top_ips.sh <<'EOF'
#!/bin/bash
awk '{print $1}' "$1" | sort | uniq -c | sort -k1,1nr -k2,2 | head -n "$2" | awk '{print $1, $2}'
EOF
