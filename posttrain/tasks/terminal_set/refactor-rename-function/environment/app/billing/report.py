from billing.core import calc
from billing.invoice import invoice_total

items = [(2.0, 3), (1.5, 4)]
print(calc(items), round(invoice_total(items), 2))
