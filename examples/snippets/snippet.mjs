const base = (process.env.BLOSSOMD_URL ?? "http://127.0.0.1:8674") + "/v1/filters/emails";
const json = { "Content-Type": "application/json" };

// Create the filter: a million keys at 1 % false positives (409: it exists already).
let r = await fetch(base, {
  method: "PUT", headers: json,
  body: JSON.stringify({ capacity: 1000000, error_rate: 0.01 }),
});
if (!r.ok && r.status !== 409) throw new Error(`create: ${r.status} ${await r.text()}`);

// Add keys, many per request: true for each key that was not in the filter yet.
r = await fetch(`${base}/add`, {
  method: "POST", headers: json,
  body: JSON.stringify({ keys: ["alice@example.com", "bob@example.com"] }),
});
if (!r.ok) throw new Error(`add: ${r.status} ${await r.text()}`);
console.log("added:", (await r.json()).results);

// Check a key; it is a path segment, so percent-encode it.
for (const key of ["alice@example.com", "carol@example.com"]) {
  r = await fetch(`${base}/keys/${encodeURIComponent(key)}`);
  if (!r.ok) throw new Error(`check: ${r.status} ${await r.text()}`);
  console.log(key, "present:", (await r.json()).present);
}
