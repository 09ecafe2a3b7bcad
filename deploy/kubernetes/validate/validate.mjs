// Validates Kubernetes manifests offline against the Kubernetes OpenAPI schema, as bundled (and
// compiled with Ajv) by the npm package kubernetes-models, pinned in package-lock.json.
//
//   node validate.mjs [--daemon-help FILE] MANIFEST.yaml...
//
// For every document of every file:
//  1. kind/apiVersion must name a known model, and the model's schema validator must accept it
//     (types, required fields, enums, formats);
//  2. no unknown field anywhere (the compiled schemas allow extra properties, the API server's
//     strict field validation does not: a misspelt `livenesProbe` would be dropped silently).
//     The fields of every type come from the package's TypeScript declarations, which are
//     generated from the same OpenAPI schema;
//  3. with --daemon-help, every `--flag` in the args of a container whose image or name is
//     "transposed" must be listed in that `transposed --help` output.
// Exit status 0 when everything is valid, 1 with one line per problem otherwise.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { parseAllDocuments } from "yaml";

const require = createRequire(import.meta.url);
const modelsRoot = path.dirname(require.resolve("kubernetes-models/package.json"));
// Custom resources the chart may render (the ServiceMonitor), same layout and Ajv validators.
const crdRoots = [path.dirname(require.resolve("@kubernetes-models/prometheus-operator/package.json"))];
const machineryRoot = path.dirname(require.resolve("@kubernetes-models/apimachinery/package.json"));

// --- the field lists of every type, from the .d.ts declarations --------------------------------

const interfaces = new Map();  // d.ts path -> {props: Map(name -> type text), imports: Map}

function resolveImport(fromFile, spec) {
  if (spec.startsWith(".")) return path.resolve(path.dirname(fromFile), spec + ".d.ts");
  if (spec.startsWith("@kubernetes-models/apimachinery/"))
    return path.join(machineryRoot, spec.slice("@kubernetes-models/apimachinery/".length) + ".d.ts");
  return null;  // @kubernetes-models/base: TypeMeta, Model (no fields of their own to check)
}

function loadInterface(file) {
  if (interfaces.has(file)) return interfaces.get(file);
  const text = fs.readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
  const imports = new Map();
  for (const m of text.matchAll(/import \{([^}]*)\} from "([^"]+)";/g))
    for (const name of m[1].split(",").map((s) => s.trim()).filter(Boolean))
      imports.set(name, resolveImport(file, m[2]));
  const head = text.match(/export interface \w+( extends TypeMeta)? \{/);
  let props = null;  // null: not an object type (e.g. Quantity = number | string)
  if (head) {
    props = new Map();
    if (head[1]) {
      props.set("apiVersion", "string");
      props.set("kind", "string");
    }
    let i = head.index + head[0].length;
    let depth = 0, body = "";
    for (; i < text.length; ++i) {
      const c = text[i];
      if (c === "{") depth++;
      if (c === "}") { if (depth === 0) break; depth--; }
      body += c;
    }
    for (const [k, v] of parseProps(body)) props.set(k, v);
  }
  const entry = { file, props, imports };
  interfaces.set(file, entry);
  return entry;
}

// The fields of an interface body or inline object type: `"name"?: TYPE; ...`, where TYPE may
// itself be an inline object (`{ "a"?: T; }`, as in the CRD models) or `{ [key: string]: T; }`.
function parseProps(body) {
  const props = new Map();
  let j = 0;
  while (true) {
    const m = /"([^"]+)"\??:\s*/g;
    m.lastIndex = j;
    const hit = m.exec(body);
    if (!hit) break;
    let k = m.lastIndex, d = 0, type = "";
    for (; k < body.length; ++k) {
      const c = body[k];
      if (c === "{" || c === "<") d++;
      if (c === "}" || c === ">") d--;
      if (c === ";" && d === 0) break;
      type += c;
    }
    props.set(hit[1], type.trim());
    j = k + 1;
  }
  return props;
}

// Checks `value` against the type text `type` declared in `owner`; reports unknown fields.
function checkType(value, type, owner, where, problems) {
  type = type.trim();
  let m;
  if ((m = type.match(/^Array<(.*)>$/s))) {
    if (Array.isArray(value)) value.forEach((v, i) => checkType(v, m[1], owner, `${where}[${i}]`, problems));
    return;
  }
  if ((m = type.match(/^\{\s*\[key: string\]:\s*(.*?);?\s*\}$/s))) {
    if (value && typeof value === "object" && !Array.isArray(value))
      for (const [k, v] of Object.entries(value)) checkType(v, m[1], owner, `${where}.${k}`, problems);
    return;
  }
  if (type.startsWith("{") && type.endsWith("}") && type.includes('"')) {
    checkObject(value, { props: parseProps(type.slice(1, -1)), imports: owner.imports }, where, problems);
    return;
  }
  if (/^IIo\w+$/.test(type) && owner.imports.get(type)) {
    checkObject(value, loadInterface(owner.imports.get(type)), where, problems);
  }
  // primitives, unions, `any`: the schema validator already checked them
}

function checkObject(value, iface, where, problems) {
  if (!iface.props || !value || typeof value !== "object" || Array.isArray(value)) return;
  for (const [k, v] of Object.entries(value)) {
    if (!iface.props.has(k)) {
      problems.push(`${where}: unknown field "${k}" (known: ${[...iface.props.keys()].join(", ")})`);
      continue;
    }
    checkType(v, iface.props.get(k), iface, `${where}.${k}`, problems);
  }
}

// --- models by apiVersion/kind ------------------------------------------------------------------

function modelFiles(apiVersion, kind) {
  if (!/^[A-Za-z0-9]+$/.test(kind) || !/^[a-z0-9.\-]*\/?[a-z0-9]+$/.test(apiVersion)) return null;
  const dir = apiVersion;  // "v1" or "apps/v1" or "networking.k8s.io/v1": the package's layout
  for (const root of [modelsRoot, ...crdRoots]) {
    const base = path.join(root, dir, kind);
    if (fs.existsSync(base + ".mjs")) return { module: base + ".mjs", dts: base + ".d.ts" };
  }
  return null;
}

async function validateDocument(doc, where, problems) {
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) {
    problems.push(`${where}: not a mapping`);
    return;
  }
  const { apiVersion, kind } = doc;
  const files = modelFiles(String(apiVersion ?? ""), String(kind ?? ""));
  if (!files) {
    problems.push(`${where}: unknown apiVersion/kind "${apiVersion}"/"${kind}"`);
    return;
  }
  where = `${where} ${kind}/${doc.metadata?.name ?? "?"}`;
  const mod = await import(files.module);
  const Model = mod[kind];
  try {
    new Model(doc).validate();
  } catch (e) {
    for (const line of String(e.message).split("\n")) problems.push(`${where}: ${line}`);
  }
  checkObject(doc, loadInterface(files.dts), where, problems);
}

// --- daemon flags -------------------------------------------------------------------------------

function containersOf(doc) {
  const spec = doc?.spec?.template?.spec ?? doc?.spec;
  return [...(spec?.containers ?? []), ...(spec?.initContainers ?? [])];
}

function checkDaemonFlags(doc, helpText, where, problems) {
  for (const c of containersOf(doc)) {
    if (c.name !== "transposed") continue;
    for (const arg of [...(c.command ?? []).slice(1), ...(c.args ?? [])]) {
      const m = String(arg).match(/^(--[a-z][a-z0-9-]*)/);
      if (!m) continue;
      const listed = new RegExp(`(^|[\\s,])${m[1]}(?![a-z0-9-])`, "m");
      if (!listed.test(helpText))
        problems.push(`${where}: container "transposed" passes ${m[1]}, which transposed --help does not list`);
    }
  }
}

// --- main ---------------------------------------------------------------------------------------

const argv = process.argv.slice(2);
let helpText = null;
const files = [];
for (let i = 0; i < argv.length; ++i) {
  if (argv[i] === "--daemon-help") helpText = fs.readFileSync(argv[++i], "utf8");
  else files.push(argv[i]);
}
if (files.length === 0) {
  console.error("usage: node validate.mjs [--daemon-help FILE] MANIFEST.yaml...");
  process.exit(2);
}
const problems = [];
let count = 0;
for (const file of files) {
  const docs = parseAllDocuments(fs.readFileSync(file, "utf8"));
  for (const [i, d] of docs.entries()) {
    const where = `${file}#${i + 1}`;
    if (d.errors.length) {
      for (const e of d.errors) problems.push(`${where}: YAML: ${e.message}`);
      continue;
    }
    const doc = d.toJS();
    if (doc === null) continue;  // empty document
    ++count;
    await validateDocument(doc, where, problems);
    if (helpText !== null) checkDaemonFlags(doc, helpText, `${where} ${doc.kind}/${doc.metadata?.name}`, problems);
  }
}
for (const p of problems) console.log(p);
console.log(`${count} Kubernetes objects in ${files.length} files: ${problems.length ? problems.length + " problems" : "valid"}`);
process.exit(problems.length ? 1 : 0);
