#!/bin/bash
echo 'TAX_RATE = 0.2' > settings.py
sed -i '1i from settings import TAX_RATE' pricing.py receipt.py
sed -i 's/0\.2/TAX_RATE/' pricing.py receipt.py
# ---
python3 receipt.py
