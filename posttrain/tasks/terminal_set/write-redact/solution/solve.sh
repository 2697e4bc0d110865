#!/bin/bash
cat > redact.sh <<'EOF'
#!/bin/bash
sed -E 's/[A-Za-z0-9._+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/[REDACTED]/g'
EOF
