// Checks render.mjs against outputs Helm's Go templates give for the same text (run by check.sh
// before the chart is rendered): trimming, control structures, functions, and refusals.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import assert from "node:assert/strict";
import { renderChart } from "./render.mjs";

function render(template, values = {}, helpers = "") {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "render-test-"));
  try {
    fs.mkdirSync(path.join(dir, "templates"));
    fs.writeFileSync(path.join(dir, "Chart.yaml"), "apiVersion: v2\nname: c\nversion: 1.2.3\nappVersion: \"4.5\"\n");
    fs.writeFileSync(path.join(dir, "values.yaml"), JSON.stringify(values));
    fs.writeFileSync(path.join(dir, "templates", "_h.tpl"), helpers);
    fs.writeFileSync(path.join(dir, "templates", "t.yaml"), template);
    const out = renderChart(dir, { name: "rel", namespace: "ns" });
    return out.length ? out[0].text : "";
  } finally {
    fs.rmSync(dir, { recursive: true });
  }
}

const cases = [
  // [template, values, expected]
  ["a: {{ .Values.x }}\n", { x: 3 }, "a: 3\n"],
  ["a:\n  {{- if .Values.on }}\n  b: 1\n  {{- end }}\nc: 2\n", { on: true }, "a:\n  b: 1\nc: 2\n"],
  ["a:\n  {{- if .Values.on }}\n  b: 1\n  {{- end }}\nc: 2\n", { on: false }, "a:\nc: 2\n"],
  ["{{ if .Values.a }}A{{ else if .Values.b }}B{{ else }}C{{ end }}", { a: 0, b: "x" }, "B"],
  ["{{ if .Values.a }}A{{ else if .Values.b }}B{{ else }}C{{ end }}", { a: [], b: "" }, "C"],
  ["n: {{ .Values.missing }}.", {}, "n: ."],
  ["{{ .Release.Name }}/{{ .Release.Namespace }}/{{ .Chart.Version }}/{{ .Chart.AppVersion }}", {}, "rel/ns/1.2.3/4.5"],
  ["{{ .Values.t | default .Chart.AppVersion }} {{ .Values.u | default \"d\" }}", { t: "", u: "v" }, "4.5 v"],
  ["{{ .Values.p | quote }}", { p: 9464 }, "\"9464\""],
  ["x:{{ toYaml .Values.m | nindent 2 }}", { m: { b: 1, a: [1, "2"] } }, "x:\n  a:\n    - 1\n    - \"2\"\n  b: 1"],
  ["{{- with .Values.m }}k: {{ .v }}{{ end }}|", { m: { v: 7 } }, "k: 7|"],
  ["{{- with .Values.m }}k{{ else }}none{{ end }}", { m: {} }, "none"],
  ["{{ range .Values.l }}[{{ . }}]{{ end }}", { l: ["a", "b"] }, "[a][b]"],
  ["{{ range $k, $v := .Values.m }}{{ $k }}={{ $v }};{{ end }}", { m: { z: 1, a: 2 } }, "a=2;z=1;"],
  ["{{- $n := printf \"%s-%d\" .Release.Name 5 }}{{ $n }}", {}, "rel-5"],
  ["{{ include \"h\" . }}", { x: "y" }, "rel:y", "{{- define \"h\" -}}\n{{ .Release.Name }}:{{ .Values.x }}\n{{- end -}}"],
  ["{{ and .Values.a .Values.b }} {{ or .Values.a .Values.b }} {{ not .Values.a }}", { a: true, b: 0 }, "0 true false"],
  ["{{ eq .Values.a \"x\" }} {{ ne .Values.a \"x\" }}", { a: "x" }, "true false"],
  ["{{/* a comment */}}a\n{{- /* trimmed */ -}}\nb", {}, "ab"],
  ["a  {{- \"x\" -}}  b", {}, "axb"],
];
let n = 0;
for (const [t, v, want, helpers] of cases) {
  assert.equal(render(t, v, helpers ?? ""), want, `template ${JSON.stringify(t)}`);
  ++n;
}
const refusals = [
  ["{{ .Values.a.b }}", {}, /nil pointer/],
  ["{{ lookup \"v1\" \"Secret\" \"ns\" \"x\" }}", {}, /outside render.mjs's subset/],
  ["{{ if .Values.a }}x", {}, /without \{\{ end \}\}/],
  ["{{ .Values.m }}", { m: { a: 1 } }, /printed as text/],
  ["{{ required \"set x\" .Values.x }}", {}, /required: set x/],
];
for (const [t, v, re] of refusals) {
  assert.throws(() => render(t, v), re, `template ${JSON.stringify(t)}`);
  ++n;
}
console.log(`render_test: ${n} cases passed`);
