#!/bin/bash
sed -i 's/\bcalc\b/compute_total/g' billing/*.py
# ---
python3 -m billing.report
