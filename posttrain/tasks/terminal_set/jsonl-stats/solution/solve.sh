#!/bin/bash
jq -s 'group_by(.type) | map({(.[0].type): length}) | add' events.jsonl > stats.json
