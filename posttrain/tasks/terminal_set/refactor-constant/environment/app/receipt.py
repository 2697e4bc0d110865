from pricing import gross
net = 50.0
print('net', net, 'tax', round(net * 0.2, 2), 'gross', gross(net))
