#!/bin/bash
sed -i "s/encoding='ascii'/encoding='utf-8'/" count_chars.py
