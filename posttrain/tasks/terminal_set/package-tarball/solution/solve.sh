#!/bin/bash
s=$(mktemp -d) && mkdir -p $s/tool-1.0/bin && cp tool $s/tool-1.0/bin/tool && chmod 755 $s/tool-1.0/bin/tool && cp README LICENSE $s/tool-1.0/ && mkdir -p dist && tar -czf dist/tool-1.0.tar.gz -C $s tool-1.0
# ---
tar -tzf dist/tool-1.0.tar.gz
