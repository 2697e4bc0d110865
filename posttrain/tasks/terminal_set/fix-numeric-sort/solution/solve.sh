#!/bin/bash
sed -i 's/sort -r/sort -rn/' biggest.sh
