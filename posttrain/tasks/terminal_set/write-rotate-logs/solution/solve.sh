#!/bin/bash
cat > rotate.sh <<'EOF'
#!/bin/bash
cd "$1" || exit 1
ls app-????-??-??.log 2>/dev/null | sort -r | tail -n +$(( $2 + 1 )) | xargs -r rm -f --
EOF
