total = 0.0
for line in open('sales.csv'):
    total += float(line.split(',')[1])
print(f'{total:.2f}')
