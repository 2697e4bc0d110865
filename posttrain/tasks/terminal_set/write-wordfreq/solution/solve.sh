#!/bin/bash
cat > wordfreq.sh <<'EOF'
#!/bin/bash
tr 'A-Z' 'a-z' < "$2" | tr -cs 'a-z' '\n' | grep -v '^$' | sort | uniq -c | sort -k1,1nr -k2,2 | head -n "$1" | awk '{print $1, $2}'
EOF
chmod +x wordfreq.sh
