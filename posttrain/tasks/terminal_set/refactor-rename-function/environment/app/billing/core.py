def calc(items):
    return sum(p * q for p, q in items)
