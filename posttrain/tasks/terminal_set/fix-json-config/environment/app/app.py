import json
c = json.load(open('config.json'))
print(c['name'], c['port'])
