import sys
from shop.cart import Cart

print(Cart(int(sys.argv[1])).total())
