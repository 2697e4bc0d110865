#!/bin/bash
jq -r '.[] | select(.active) | .email' users.json | sort > emails.txt
