import os
from urllib.parse import quote

import requests

base = os.environ.get("BLOSSOMD_URL", "http://127.0.0.1:8674") + "/v1/filters/emails"

# Create the filter: a million keys at 1 % false positives (409: it exists already).
r = requests.put(base, json={"capacity": 1000000, "error_rate": 0.01})
if r.status_code != 409:
    r.raise_for_status()

# Add keys, many per request: true for each key that was not in the filter yet.
r = requests.post(base + "/add", json={"keys": ["alice@example.com", "bob@example.com"]})
r.raise_for_status()
print("added:", r.json()["results"])

# Check a key; it is a path segment, so percent-encode it.
for key in ["alice@example.com", "carol@example.com"]:
    r = requests.get(base + "/keys/" + quote(key, safe=""))
    r.raise_for_status()
    print(key, "present:", r.json()["present"])
