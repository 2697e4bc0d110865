def gross(net):
    return round(net * (1 + 0.2), 2)
