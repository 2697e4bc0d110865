#!/bin/bash
sort -r "$1" | head -3
