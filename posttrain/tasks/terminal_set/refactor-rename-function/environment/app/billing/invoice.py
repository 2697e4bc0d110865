from billing.core import calc

def invoice_total(lines):
    return calc(lines) * 1.1
