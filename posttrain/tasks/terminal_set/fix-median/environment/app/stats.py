def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2]
