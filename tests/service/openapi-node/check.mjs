// SPDX-License-Identifier: MIT
// The checks of tests/service/openapi.py that need an OpenAPI validator and JSON Schema
// 2020-12: `node check.mjs DOC OBSERVED.json` prints one JSON object on stdout:
//   document:   the OpenAPI schema validator's verdict on DOC ({valid, version, errors}),
//               and the document's info.version (the API's: blossomd's version)
//   refs:       every local $ref that does not resolve
//   examples:   every example (media type, parameter, header) its schema refuses
//   operations: every "METHOD /path" the document has
//   observed:   for each answer in OBSERVED.json (a list of {method, path, status,
//               content_type, headers, body}; path is the route's template, or null for a
//               path that is no route), the problems found: the (route, method, status,
//               media type) not documented, a declared header missing, or the body refused by
//               the schema of that response and media type. A response marked
//               x-content-type-missing (libmicrohttpd's own 414 and 431) may come without a
//               Content-Type.
import { readFileSync } from "node:fs";
import { Validator } from "@seriousme/openapi-schema-validator";
import Ajv2020 from "ajv/dist/2020.js";
import YAML from "yaml";

const [docPath, observedPath] = process.argv.slice(2);
const text = readFileSync(docPath, "utf8");
const doc = YAML.parse(text);
const out = { document: {}, refs: [], examples: [], operations: [], observed: [] };

const validator = new Validator();
const verdict = await validator.validate(text);
out.document = {
	valid: verdict.valid,
	version: validator.version,
	errors: verdict.errors ?? null,
	info_version: doc.info?.version ?? null,
};

// JSON pointers ("#/a/b~1c") into the document, each segment URI-encoded too ("{name}").
const esc = (s) => encodeURIComponent(String(s).replaceAll("~", "~0").replaceAll("/", "~1"));
const unesc = (s) => decodeURIComponent(s).replaceAll("~1", "/").replaceAll("~0", "~");
function resolve(ref) {
	if (!ref.startsWith("#/")) return undefined;
	let node = doc;
	for (const part of ref.slice(2).split("/")) {
		if (node === null || typeof node !== "object") return undefined;
		node = node[unesc(part)];
	}
	return node;
}
const deref = (o) => (o && o.$ref ? resolve(o.$ref) : o);

(function walk(node, where) {
	if (Array.isArray(node)) return node.forEach((v, i) => walk(v, `${where}/${i}`));
	if (node === null || typeof node !== "object") return;
	if (typeof node.$ref === "string" && resolve(node.$ref) === undefined)
		out.refs.push(`${where}: ${node.$ref}`);
	for (const [k, v] of Object.entries(node)) walk(v, `${where}/${esc(k)}`);
})(doc, "#");

// The document as a schema resource: a response schema is checked through a $ref into it, so
// its own "#/components/schemas/..." refs resolve against the document.
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(doc, "openapi");
const compiled = new Map();
function check(pointer, value) {
	if (!compiled.has(pointer)) compiled.set(pointer, ajv.compile({ $ref: `openapi${pointer}` }));
	const validate = compiled.get(pointer);
	return validate(value) ? null : ajv.errorsText(validate.errors, { dataVar: "body" });
}
const isJson = (media) => media === "application/json" || media.endsWith("+json");

// Examples: of media types (JSON ones against their schema, others must be strings), of
// parameters and of headers.
(function examples(node, where) {
	if (Array.isArray(node)) return node.forEach((v, i) => examples(v, `${where}/${i}`));
	if (node === null || typeof node !== "object") return;
	for (const [k, v] of Object.entries(node)) {
		const here = `${where}/${esc(k)}`;
		if (k === "content" && v && typeof v === "object" && !Array.isArray(v)) {
			for (const [media, mt] of Object.entries(v)) {
				const base = `${here}/${esc(media)}`;
				for (const [name, ex] of Object.entries(mt.examples ?? {})) {
					const value = deref(ex).value;
					const err = isJson(media)
						? check(`${base}/schema`, value)
						: typeof value === "string" ? null : "not a string";
					if (err) out.examples.push(`${base}/examples/${esc(name)}: ${err}`);
				}
			}
		}
		if ((k === "parameters" || k === "headers") && v && typeof v === "object") {
			for (const [name, p] of Object.entries(v)) {
				if (p.$ref || !p.schema) continue;
				const base = `${here}/${esc(name)}`;
				const values = Object.entries(p.examples ?? {}).map(([n, e]) => [n, deref(e).value]);
				if ("example" in p) values.push(["example", p.example]);
				for (const [n, value] of values) {
					const err = check(`${base}/schema`, value);
					if (err) out.examples.push(`${base} example ${n}: ${err}`);
				}
			}
		}
		examples(v, here);
	}
})(doc, "#");

const METHODS = ["get", "head", "put", "post", "patch", "delete", "options", "trace"];
for (const [path, item] of Object.entries(doc.paths ?? {}))
	for (const m of METHODS) if (item[m]) out.operations.push(`${m.toUpperCase()} ${path}`);

// The response object (and its pointer) that documents one answer, or why there is none.
function documented(o) {
	const responses = "#/components/responses";
	if (o.path === null) {
		if (o.status === 404) return { pointer: `${responses}/NotFound` };
		return { error: `status ${o.status} for a path that is no route` };
	}
	const item = doc.paths?.[o.path];
	if (!item) return { error: `path ${o.path} is not in the document` };
	const m = o.method.toLowerCase();
	if (!METHODS.includes(m) || !item[m]) {
		if (o.status === 405) return { pointer: `${responses}/MethodNotAllowed` };
		return { error: `no ${o.method} operation on ${o.path} (status ${o.status})` };
	}
	const base = `#/paths/${esc(o.path)}/${m}/responses`;
	const key = String(o.status) in item[m].responses ? String(o.status) : "default";
	if (!(key in item[m].responses))
		return { error: `${o.method} ${o.path}: status ${o.status} not documented` };
	let pointer = `${base}/${key}`;
	const ref = item[m].responses[key].$ref;
	if (ref) pointer = ref;
	return { pointer };
}

const observed = observedPath ? JSON.parse(readFileSync(observedPath, "utf8")) : [];
for (const o of observed) {
	const problems = [];
	const d = documented(o);
	if (d.error) {
		out.observed.push(d.error);
		continue;
	}
	const resp = resolve(d.pointer);
	for (const h of Object.keys(resp.headers ?? {}))
		if (!(h.toLowerCase() in (o.headers ?? {}))) problems.push(`header ${h} missing`);
	const media = (o.content_type ?? "").split(";")[0].trim().toLowerCase();
	if (o.method === "HEAD" || !resp.content) {
		if (o.body !== "") problems.push(`a body where ${d.pointer} has none`);
	} else if (!o.content_type && resp["x-content-type-missing"]) {
		// libmicrohttpd's own answers (414, 431) come without a Content-Type.
	} else if (!(media in resp.content)) {
		problems.push(`media type "${media}" not documented in ${d.pointer}`);
	} else if (isJson(media)) {
		let body;
		try {
			body = JSON.parse(o.body);
		} catch (e) {
			problems.push(`body is not JSON: ${e.message}`);
		}
		if (body !== undefined) {
			const err = check(`${d.pointer}/content/${esc(media)}/schema`, body);
			if (err) problems.push(err);
		}
	}
	out.observed.push(problems.length ? problems.join("; ") : null);
}

process.stdout.write(JSON.stringify(out) + "\n");
