import sys
words = open(sys.argv[1]).read().split()
print(f'words={len(words)} unique={len(set(words))}')
