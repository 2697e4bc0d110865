import sys
with open(sys.argv[1], encoding='ascii') as f:
    print(len(f.read()))
