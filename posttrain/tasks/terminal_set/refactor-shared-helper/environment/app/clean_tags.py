import sys
for line in sys.stdin:
    s = line.strip().lower()
    s = ' '.join(s.split())
    s = s.replace('-', '_')
    print('#' + s)
