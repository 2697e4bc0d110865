#!/bin/bash
sed -i 's/listen 8080;/listen 8081;/; /server_tokens on;/d; s/^http {$/http {\n    gzip on;/' server.conf
# ---
cat server.conf
