// Renders a Helm chart offline, for CI: `helm` is not a Debian 12 package and the machines here
// reach no other package source, so this is the subset of Helm's Go templates that
// deploy/helm/transposed uses, and nothing more. Anything outside the subset is an error (the
// chart must stay inside it), never silently different output:
//   text and {{ actions }} with {{- / -}} whitespace trimming and {{/* comments */}};
//   if / else if / else / end, with / end, range (over a list or map, optionally `$v :=` or
//   `$k, $v :=`), define + include, `$name := pipeline`;
//   pipelines (`a | f x`) of: .Values/.Release/.Chart fields, `.`, `$`, $variables, string,
//   number and bool literals, parentheses, and the functions default, quote, squote, toYaml,
//   indent, nindent, required, printf (%s %d %v %q), include, and, or, not, eq, ne, empty,
//   toString, trimSuffix, lower, int.
// Helm's toYaml sorts map keys (sigs.k8s.io/yaml); so does this one. A missing value prints as
// nothing (Helm's missingkey=zero); a field of a missing map is an error (as in Helm).
//
//   node render.mjs CHART_DIR [-f VALUES.yaml]... [--name RELEASE] [--namespace NS] [-o OUT.yaml]
//
// prints (or writes) every rendered manifest of templates/*.yaml, each after `---` and a
// `# Source:` line like `helm template`; templates whose output is only whitespace are left out.
import fs from "node:fs";
import path from "node:path";
import YAML from "yaml";

// --- lexing: text and actions -------------------------------------------------------------------

function lex(src, file) {
  const out = [];
  let i = 0;
  while (i < src.length) {
    const open = src.indexOf("{{", i);
    if (open < 0) { out.push({ t: "text", s: src.slice(i) }); break; }
    let text = src.slice(i, open);
    let j = open + 2;
    if (src[j] === "-" && /\s/.test(src[j + 1])) { text = text.replace(/\s+$/, ""); j += 2; }
    if (text) out.push({ t: "text", s: text });
    const close = findClose(src, j, file);
    let body = src.slice(j, close);
    let k = close + 2;
    if (/\s-$/.test(body)) {
      body = body.slice(0, -2);
      while (k < src.length && /\s/.test(src[k])) k++;
    }
    body = body.trim();
    if (!(body.startsWith("/*") && body.endsWith("*/"))) out.push({ t: "action", s: body, at: lineOf(src, open, file) });
    i = k;
  }
  return out;
}

function findClose(src, j, file) {
  let q = null;
  for (let k = j; k < src.length; ++k) {
    const c = src[k];
    if (q) { if (c === "\\" && q === '"') k++; else if (c === q) q = null; continue; }
    if (c === '"' || c === "`") q = c;
    else if (c === "}" && src[k + 1] === "}") return k;
  }
  throw new Error(`${lineOf(src, j, file)}: unclosed {{`);
}

function lineOf(src, pos, file) {
  return `${file}:${src.slice(0, pos).split("\n").length}`;
}

// --- parsing: the control structure -------------------------------------------------------------

function parse(tokens, defines) {
  let pos = 0;
  function block(stopAt) {
    const nodes = [];
    while (pos < tokens.length) {
      const tok = tokens[pos];
      if (tok.t === "text") { nodes.push(tok); pos++; continue; }
      const kw = tok.s.match(/^(if|else if|else|end|range|with|define)\b\s*(.*)$/s);
      if (!kw) { nodes.push({ t: "expr", s: tok.s, at: tok.at }); pos++; continue; }
      const [, word, rest] = kw;
      if (word === "end" || word === "else" || word === "else if") {
        if (!stopAt) throw new Error(`${tok.at}: unexpected {{ ${word} }}`);
        return { nodes, stop: word, rest, at: tok.at };
      }
      pos++;
      if (word === "define") {
        const name = JSON.parse(rest.trim());
        const r = block(true);
        if (r.stop !== "end") throw new Error(`${tok.at}: define without end`);
        pos++;
        defines.set(name, r.nodes);
        continue;
      }
      const node = { t: word, at: tok.at, branches: [], otherwise: null };
      let cond = rest;
      for (;;) {
        const r = block(true);
        if (!r.stop) throw new Error(`${tok.at}: {{ ${word} }} without {{ end }}`);
        node.branches.push({ cond, body: r.nodes });
        if (r.stop === "end") { pos++; break; }
        pos++;
        if (r.stop === "else if") {
          if (word !== "if") throw new Error(`${r.at}: else if inside ${word}`);
          cond = r.rest;
          continue;
        }
        const e = block(true);
        if (e.stop !== "end") throw new Error(`${r.at}: else without end`);
        pos++;
        node.otherwise = e.nodes;
        break;
      }
      nodes.push(node);
    }
    if (stopAt) return { nodes, stop: null };
    return { nodes };
  }
  return block(false).nodes;
}

// --- expressions --------------------------------------------------------------------------------

function tokenize(s, at) {
  const toks = [];
  const re = /\s*(?:("(?:[^"\\]|\\.)*")|(`[^`]*`)|(:=|\||\(|\)|,)|(-?\d+(?:\.\d+)?)|(\$[A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)|(\.[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*|\.)|([A-Za-z_][A-Za-z0-9_]*))/y;
  let m;
  re.lastIndex = 0;
  while (re.lastIndex < s.length) {
    const start = re.lastIndex;
    if (/^\s*$/.test(s.slice(start))) break;
    m = re.exec(s);
    if (!m || m.index !== start) throw new Error(`${at}: cannot parse "${s.slice(start)}"`);
    if (m[1]) toks.push({ k: "lit", v: JSON.parse(m[1]) });
    else if (m[2]) toks.push({ k: "lit", v: m[2].slice(1, -1) });
    else if (m[3]) toks.push({ k: m[3] });
    else if (m[4]) toks.push({ k: "lit", v: Number(m[4]) });
    else if (m[5]) toks.push({ k: "var", v: m[5] });
    else if (m[6]) toks.push({ k: "field", v: m[6] });
    else if (m[7]) toks.push(["true", "false", "nil"].includes(m[7])
      ? { k: "lit", v: m[7] === "nil" ? null : m[7] === "true" } : { k: "fn", v: m[7] });
  }
  return toks;
}

function truthy(v) {
  if (v === null || v === undefined || v === false || v === 0 || v === "") return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === "object") return Object.keys(v).length > 0;
  return true;
}

function walk(base, names, at, what) {
  let v = base;
  for (const n of names) {
    if (v === null || v === undefined) throw new Error(`${at}: nil pointer evaluating ${what} (at .${n})`);
    if (typeof v !== "object" || Array.isArray(v)) throw new Error(`${at}: ${what}: .${n} of a non-map`);
    v = Object.prototype.hasOwnProperty.call(v, n) ? v[n] : null;
  }
  return v;
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object")
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  return v;
}

function str(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "object") throw new Error(`a ${Array.isArray(v) ? "list" : "map"} printed as text (use toYaml)`);
  return String(v);
}

function goQuote(s) {
  return JSON.stringify(s);
}

function makeFunctions(ctx) {
  return {
    default: (d, v) => (truthy(v) ? v : d),
    quote: (...a) => a.map((x) => goQuote(str(x))).join(" "),
    squote: (...a) => a.map((x) => `'${str(x)}'`).join(" "),
    toYaml: (v) => (v === null || v === undefined ? "null"
      : YAML.stringify(sortKeys(v), { lineWidth: 0 }).replace(/\n$/, "")),
    indent: (n, s) => " ".repeat(n) + str(s).replace(/\n/g, "\n" + " ".repeat(n)),
    nindent: (n, s) => "\n" + " ".repeat(n) + str(s).replace(/\n/g, "\n" + " ".repeat(n)),
    required: (msg, v) => {
      if (v === null || v === undefined || v === "") throw new Error(`required: ${msg}`);
      return v;
    },
    printf: (fmt, ...a) => {
      let i = 0;
      return fmt.replace(/%([sdvq%])/g, (_, c) => {
        if (c === "%") return "%";
        const x = a[i++];
        if (c === "d") return String(Math.trunc(Number(x)));
        if (c === "q") return goQuote(str(x));
        return str(x);
      });
    },
    include: (name, dot) => ctx.include(name, dot),
    and: (...a) => { for (const x of a) if (!truthy(x)) return x; return a[a.length - 1]; },
    or: (...a) => { for (const x of a) if (truthy(x)) return x; return a[a.length - 1]; },
    not: (x) => !truthy(x),
    eq: (a, ...b) => b.some((x) => x === a),
    ne: (a, b) => a !== b,
    empty: (x) => !truthy(x),
    toString: (x) => str(x),
    trimSuffix: (suffix, s) => (str(s).endsWith(suffix) ? str(s).slice(0, -suffix.length) : str(s)),
    lower: (s) => str(s).toLowerCase(),
    int: (x) => Math.trunc(Number(x)),
  };
}

// Evaluates a pipeline (tokens) in scope {dot, vars}.
function evalPipeline(toks, scope, ctx, at) {
  // split on top-level `|`
  const cmds = [[]];
  let depth = 0;
  for (const t of toks) {
    if (t.k === "(") depth++;
    if (t.k === ")") depth--;
    if (t.k === "|" && depth === 0) cmds.push([]);
    else cmds[cmds.length - 1].push(t);
  }
  let value;
  let first = true;
  for (const cmd of cmds) {
    if (cmd.length === 0) throw new Error(`${at}: empty command in pipeline`);
    const args = operands(cmd.slice(cmd[0].k === "fn" ? 1 : 0), scope, ctx, at);
    if (cmd[0].k === "fn") {
      const f = ctx.functions[cmd[0].v];
      if (!f) throw new Error(`${at}: function "${cmd[0].v}" is outside render.mjs's subset`);
      if (!first) args.push(value);
      value = f(...args);
    } else {
      if (args.length !== 1 || !first) throw new Error(`${at}: cannot call a value`);
      value = args[0];
    }
    first = false;
  }
  return value;
}

function operands(toks, scope, ctx, at) {
  const out = [];
  for (let i = 0; i < toks.length; ++i) {
    const t = toks[i];
    if (t.k === "lit") out.push(t.v);
    else if (t.k === "field") {
      out.push(t.v === "." ? scope.dot : walk(scope.dot, t.v.slice(1).split("."), at, t.v));
    } else if (t.k === "var") {
      const [name, ...rest] = t.v.split(".");
      if (!scope.vars.has(name)) throw new Error(`${at}: undefined variable ${name}`);
      out.push(walk(scope.vars.get(name), rest, at, t.v));
    } else if (t.k === "(") {
      let depth = 1, j = i + 1;
      for (; j < toks.length && depth; ++j) {
        if (toks[j].k === "(") depth++;
        if (toks[j].k === ")") depth--;
      }
      if (depth) throw new Error(`${at}: unbalanced (`);
      out.push(evalPipeline(toks.slice(i + 1, j - 1), scope, ctx, at));
      i = j - 1;
    } else if (t.k === "fn") {
      out.push(evalPipeline([t], scope, ctx, at));  // a function without arguments
    } else throw new Error(`${at}: unexpected "${t.k}"`);
  }
  return out;
}

// `$a := pipe` / `$k, $v := pipe` / `pipe`
function splitDecl(s, at) {
  const toks = tokenize(s, at);
  const d = toks.findIndex((t) => t.k === ":=");
  if (d < 0) return { names: [], toks };
  const names = toks.slice(0, d).filter((t) => t.k !== ",").map((t) => {
    if (t.k !== "var") throw new Error(`${at}: bad declaration`);
    return t.v;
  });
  return { names, toks: toks.slice(d + 1) };
}

function exec(nodes, scope, ctx) {
  let out = "";
  for (const n of nodes) {
    if (n.t === "text") { out += n.s; continue; }
    if (n.t === "expr") {
      const { names, toks } = splitDecl(n.s, n.at);
      const v = evalPipeline(toks, scope, ctx, n.at);
      if (names.length) { scope.vars.set(names[0], v); continue; }
      try { out += str(v); } catch (e) { throw new Error(`${n.at}: ${e.message}`); }
      continue;
    }
    if (n.t === "if") {
      let done = false;
      for (const b of n.branches) {
        if (truthy(evalPipeline(tokenize(b.cond, n.at), scope, ctx, n.at))) {
          out += exec(b.body, scope, ctx);
          done = true;
          break;
        }
      }
      if (!done && n.otherwise) out += exec(n.otherwise, scope, ctx);
      continue;
    }
    const { names, toks } = splitDecl(n.branches[0].cond, n.at);
    const v = evalPipeline(toks, scope, ctx, n.at);
    if (n.t === "with") {
      if (truthy(v)) out += exec(n.branches[0].body, { dot: v, vars: new Map(scope.vars) }, ctx);
      else if (n.otherwise) out += exec(n.otherwise, scope, ctx);
      continue;
    }
    // range
    const items = Array.isArray(v) ? v.map((x, i) => [i, x])
      : v && typeof v === "object" ? Object.keys(v).sort().map((k) => [k, v[k]]) : [];
    if (v !== null && v !== undefined && typeof v !== "object") throw new Error(`${n.at}: range over a ${typeof v}`);
    if (!items.length && n.otherwise) out += exec(n.otherwise, scope, ctx);
    for (const [k, x] of items) {
      const vars = new Map(scope.vars);
      if (names.length === 1) vars.set(names[0], x);
      if (names.length === 2) { vars.set(names[0], k); vars.set(names[1], x); }
      out += exec(n.branches[0].body, { dot: x, vars }, ctx);
    }
  }
  return out;
}

// --- the chart ----------------------------------------------------------------------------------

function isMap(v) {
  return v && typeof v === "object" && !Array.isArray(v);
}

function merge(base, over) {
  if (!isMap(base) || !isMap(over)) return over;
  const out = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = k in base ? merge(base[k], v) : v;
  return out;
}

export function renderChart(chartDir, { valueFiles = [], name = "transposed", namespace = "default" } = {}) {
  const chart = YAML.parse(fs.readFileSync(path.join(chartDir, "Chart.yaml"), "utf8"));
  let values = YAML.parse(fs.readFileSync(path.join(chartDir, "values.yaml"), "utf8")) ?? {};
  for (const f of valueFiles) values = merge(values, YAML.parse(fs.readFileSync(f, "utf8")) ?? {});
  const root = {
    Values: values,
    Release: { Name: name, Namespace: namespace, Service: "Helm", IsInstall: true, IsUpgrade: false, Revision: 1 },
    Chart: { Name: chart.name, Version: chart.version, AppVersion: chart.appVersion ?? "" },
  };
  const dir = path.join(chartDir, "templates");
  const files = fs.readdirSync(dir).sort();
  const defines = new Map();
  const parsed = [];
  for (const f of files) {
    if (!/\.(ya?ml|tpl)$/.test(f)) continue;
    const rel = `${chart.name}/templates/${f}`;
    const nodes = parse(lex(fs.readFileSync(path.join(dir, f), "utf8"), rel), defines);
    if (!f.startsWith("_")) parsed.push({ rel, nodes });
  }
  const ctx = {};
  ctx.functions = makeFunctions(ctx);
  ctx.include = (n, dot) => {
    if (!defines.has(n)) throw new Error(`include: no template "${n}"`);
    return exec(defines.get(n), { dot, vars: new Map([["$", dot]]) }, ctx);
  };
  const out = [];
  for (const { rel, nodes } of parsed) {
    const text = exec(nodes, { dot: root, vars: new Map([["$", root]]) }, ctx);
    if (text.trim()) out.push({ source: rel, text });
  }
  return out;
}

export function joinManifests(rendered) {
  return rendered.map((r) => `---\n# Source: ${r.source}\n${r.text.replace(/^\n+/, "")}`).join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const argv = process.argv.slice(2);
  const opts = { valueFiles: [] };
  let chartDir = null, outFile = null;
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === "-f") opts.valueFiles.push(argv[++i]);
    else if (argv[i] === "--name") opts.name = argv[++i];
    else if (argv[i] === "--namespace") opts.namespace = argv[++i];
    else if (argv[i] === "-o") outFile = argv[++i];
    else chartDir = argv[i];
  }
  if (!chartDir) {
    console.error("usage: node render.mjs CHART_DIR [-f VALUES.yaml]... [--name RELEASE] [--namespace NS] [-o OUT.yaml]");
    process.exit(2);
  }
  try {
    const text = joinManifests(renderChart(chartDir, opts));
    if (outFile) fs.writeFileSync(outFile, text); else process.stdout.write(text);
  } catch (e) {
    console.error(`render.mjs: ${e.message}`);
    process.exit(1);
  }
}
