from shop.cart import Cart

UNIT = 4.5

def price_of(cart: 'Cart') -> float:
    return round(cart.count * UNIT, 2)
