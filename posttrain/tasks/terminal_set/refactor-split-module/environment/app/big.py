class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, name, n):
        self.items[name] = self.items.get(name, 0) + n

    def total(self):
        return sum(self.items.values())


inv = Inventory()
inv.add('bolt', 3)
inv.add('nut', 4)
inv.add('bolt', 1)
print(inv.items, inv.total())
