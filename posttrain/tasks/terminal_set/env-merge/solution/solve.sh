#!/bin/bash
while IFS='=' read -r k v; do grep -q "^$k=" .env || echo "$k=$v" >> .env; done < .env.example
# ---
cat .env
