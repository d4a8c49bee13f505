// Compression trade-offs: score vs params / size / latency, a colour per method and a symbol per
// source model (the key under the chart names them), the Pareto front;
// with ?study=<id>, one multi-objective study's trials and its own Pareto front (◆, linked to their jobs);
// y = score or, per attack recipe, accuracy under attack (?y=attack:<recipe>; models without that attack left out, counted).
import { PALETTE, api, el, flash, fmt, fmtBytes, fmtParams, fmtScore, human, plotlyReady, query, setQuery } from "/static/js/api.js";

const form = document.getElementById("comp-filters");
const chart = document.getElementById("comp-chart");
const TABLE_ROWS = 300;
let data = null;

// The settings that differ from the method's defaults (ptmlab.views.compression.changed_settings).
function settings(config) {
  return Object.entries(config || {}).map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(", ");
}

function fill(select, values, labels, current) {
  select.replaceChildren(...values.map((v, i) => el("option", { value: v }, labels ? labels[i] : v)));
  if (values.includes(current)) select.value = current;
}

// The y value: the task score, or accuracy under the chosen recipe's attack (null: not attacked).
function yRecipe() {
  const y = form.elements.y.value || "score";
  return y.startsWith("attack:") ? y.slice(7) : null;
}

function yOf(p) {
  const recipe = yRecipe();
  if (!recipe) return p.score;
  const a = (p.robustness || {})[recipe];
  return a ? a.accuracy_under_attack : null;
}

function attacks(p) {
  return Object.entries(p.robustness || {}).map(([r, a]) =>
    `<br>${r}: ${fmt(a.accuracy_under_attack, 4)} under attack (clean ${fmt(a.clean_accuracy, 4)}, ${a.num_examples} ex., seed ${a.seed})`).join("");
}

function robustnessNote() {
  const note = document.getElementById("comp-robustness");
  const recipe = yRecipe();
  const missing = recipe ? (data.robustness_missing || {})[recipe] || 0 : 0;
  note.hidden = !missing;
  note.textContent = missing ? `${missing} of ${data.points.length + data.references.length} models have no ${recipe} attack result and are left out of this axis.` : "";
}

// Each source model its own marker symbol (and its uncompressed reference its own star colour), so
// that compressions of two models by one method are told apart; shown as text in the key.
const SOURCE_SYMBOLS = [["circle", "●"], ["square", "■"], ["diamond", "◆"], ["triangle-up", "▲"], ["cross", "✚"],
  ["x", "✖"], ["pentagon", "⬟"], ["hexagon", "⬢"]];
const STAR_COLOURS = ["#f5b700", "#7f3fbf", "#00a2a2", "#e8589c", "#6b8e23", "#a0522d"];
const sourceName = (p) => p.source_label ?? p.source;

function sourceIndex() {
  const names = [...new Set([...data.points, ...data.references].map(sourceName))].sort();
  return new Map(names.map((n, i) => [n, i]));
}

// A value of the x axis as it reads: sizes in MiB, parameter counts in k/M.
const AXIS_SCALE = { size_bytes: { div: 2 ** 20, unit: "Size on disk (MiB)" } };

function axisValue(p, axis) {
  if (axis === "size_bytes") return fmtBytes(p[axis]);
  if (axis === "params") return fmtParams(p[axis]);
  return human(p[axis]);
}

function hover(p, axisLabel, axis) {
  return `<b>${p.method}</b> on ${p.source_label ?? p.source}<br>${data.metric_label ?? "score"} ${fmtScore(p.score)}<br>${axisLabel}: ${axisValue(p, axis)}` +
    (p.retention !== null && p.retention !== undefined ? `<br>retention ${(100 * p.retention).toFixed(1)}%` +
      (p.with_extra_training ? " (with extra training, no control)" : "") : "") +
    (p.retention_vs_control ? `<br>vs its control ${(100 * p.retention_vs_control).toFixed(1)}%` : "") +
    (p.speedup ? `<br>speed-up ${p.speedup.toFixed(2)}×` : "") +
    (p.control_score !== null && p.control_score !== undefined ? `<br>control (same training, uncompressed) ${p.control_score}` : "") +
    (settings(p.changed) ? `<br>${settings(p.changed)}` : "") + (p.measured ? `<br>measured: ${p.measured}` : "") +
    attacks(p) + (p.job_id ? `<br>job #${p.job_id}` : p.id ? `<br>result ${p.id}` : "") + (p.trial !== undefined && p.trial !== null ? `<br>study trial ${p.trial}` +
      (p.study_pareto ? " (on the study's Pareto front)" : "") : "");
}

function draw() {
  const axis = form.elements.axis.value;
  const axisLabel = AXIS_SCALE[axis]?.unit ?? data.axes.find((a) => a.key === axis).label;
  const div = AXIS_SCALE[axis]?.div ?? 1;
  const xOf = (p) => (p[axis] === null || p[axis] === undefined ? p[axis] : p[axis] / div);
  const sources = sourceIndex();
  const several = sources.size > 1;
  const symbolOf = (p) => (several ? SOURCE_SYMBOLS[sources.get(sourceName(p)) % SOURCE_SYMBOLS.length][0] : "circle");
  const recipe = yRecipe();
  const points = data.points.filter((p) => p[axis] !== null && yOf(p) !== null && yOf(p) !== undefined);
  const type = points.length > 1000 ? "scattergl" : "scatter";
  const traces = data.methods.map((method, i) => {
    const mine = points.filter((p) => p.method === method);
    return {
      type, mode: "markers", name: method, x: mine.map(xOf), y: mine.map(yOf),
      customdata: mine.map((p) => p.id), text: mine.map((p) => hover(p, axisLabel, axis)), hoverinfo: "text",
      marker: { color: PALETTE[i % PALETTE.length], size: 9, opacity: 0.85, symbol: mine.map(symbolOf) },
    };
  });
  const byId = new Map(points.map((p) => [p.id, p]));
  const fronts = recipe ? (data.robustness_fronts || {})[recipe] || {} : data.fronts;
  const front = (fronts[axis] || []).map((id) => byId.get(id)).filter(Boolean);
  traces.push({
    type: "scatter", mode: "lines+markers", name: "Pareto front", x: front.map(xOf), y: front.map(yOf),
    customdata: front.map((p) => p.id), text: front.map((p) => hover(p, axisLabel, axis)), hoverinfo: "text",
    line: { color: "#222", width: 1.5, dash: "dot", shape: "hv" },
    marker: { size: 15, color: "rgba(0,0,0,0)", line: { color: "#222", width: 2 } },
  });
  if (data.study) {
    const mine = points.filter((p) => p.study_pareto);
    traces.push({
      type: "scatter", mode: "markers", name: `study ${data.study.name || data.study.id}: Pareto front (${data.study.objectives.join(", ")})`,
      x: mine.map(xOf), y: mine.map(yOf), customdata: mine.map((p) => p.id),
      text: mine.map((p) => hover(p, axisLabel, axis)), hoverinfo: "text",
      marker: { symbol: "diamond-open", size: 17, color: "#cf222e", line: { color: "#cf222e", width: 2 } },
    });
  }
  const refs = data.references.filter((r) => r[axis] !== null && yOf(r) !== null && yOf(r) !== undefined);
  if (refs.length) {
    traces.push({
      // Each star named on the chart and coloured by its source (the key under the chart matches).
      type: "scatter", mode: "markers+text", name: "uncompressed source", x: refs.map(xOf), y: refs.map(yOf),
      text: refs.map(sourceName), textposition: "top center", hovertext: refs.map((r) => hover({ ...r, method: "uncompressed" }, axisLabel, axis)),
      hoverinfo: "text", marker: { symbol: "star", size: 16, color: refs.map((r) => STAR_COLOURS[sources.get(sourceName(r)) % STAR_COLOURS.length]),
        line: { color: "#444", width: 1 } },
    });
  }
  Plotly.react(chart, traces, {
    margin: { t: 20, r: 20, b: 50, l: 60 }, height: 460, hovermode: "closest",
    xaxis: { title: { text: axisLabel }, type: form.elements.logx.checked ? "log" : "linear" },
    // the task's main metric names the axis: BLEU or ROUGE-L (0-100) for a generation task, accuracy, F1 ...
    yaxis: { title: { text: recipe ? `${data.task} accuracy under ${recipe}` : `${data.task} ${data.metric_label ?? "score"}` +
      (data.metric_scale === "0-100" ? " (0-100)" : "") } }, legend: { orientation: "h", y: -0.18 },
  }, { responsive: true, displaylogo: false });
  sourceKey(sources, several);
}

function sourceKey(sources, several) {
  const key = document.getElementById("comp-sources");
  key.hidden = !several;
  if (!several) return;
  key.replaceChildren("source models: ", ...[...sources].flatMap(([name, i], n) => [n ? " · " : "",
    el("span", { class: "source", "data-source": name }, `${SOURCE_SYMBOLS[i % SOURCE_SYMBOLS.length][1]} `,
      el("span", { style: `color: ${STAR_COLOURS[i % STAR_COLOURS.length]}` }, "★"), ` ${name}`)]),
  " (● ■ ◆ …: compressed copies, ★: the uncompressed model)");
}

// A run is named by its job (a result recorded by hand, without one, by its result id).
function runLink(p) {
  return p.job_id ? el("a", { href: `/jobs/${p.job_id}` }, `#${p.job_id}`) : el("a", { href: `/runs/${p.id}` }, `result ${p.id}`);
}

function table() {
  const axis = form.elements.axis.value;
  const rows = [...data.points].sort((a, b) => (a[axis] ?? Infinity) - (b[axis] ?? Infinity)).slice(0, TABLE_ROWS);
  document.getElementById("comp-score-head").textContent = data.metric_label ?? "score";
  document.querySelector("#comp-table tbody").replaceChildren(
    ...data.references.map((r) => el("tr", { class: "reference" },
      el("td", {}, r.id ? runLink(r) : "–"), el("td", {}, "uncompressed ★"), el("td", { title: r.source }, r.source_label ?? r.source),
      el("td", {}, ""), el("td", { class: "num" }, fmtScore(r.score)), el("td", { class: "num" }, fmtParams(r.params)),
      el("td", { class: "num" }, fmtBytes(r.size_bytes)), el("td", { class: "num" }, fmt(r.latency_ms, 2)),
      el("td", { class: "num" }, "100%"), el("td", {}, ""), data.study ? el("td", {}, "") : "")),
    ...rows.map((p) => el("tr", { "data-id": p.id, "data-pareto": String(p.pareto[axis]) },
      el("td", {}, runLink(p)), el("td", {}, p.method), el("td", { title: p.source }, p.source_label ?? p.source),
      el("td", { class: "small settings" }, settings(p.changed)), el("td", { class: "num" }, fmtScore(p.score)),
      el("td", { class: "num" }, fmtParams(p.params)), el("td", { class: "num" }, fmtBytes(p.size_bytes)),
      el("td", { class: "num" }, fmt(p.latency_ms, 2)),
      el("td", { class: "num", title: p.with_extra_training ? "with extra training: no control was trained" : "" },
        p.retention === null ? "–" : `${(100 * p.retention).toFixed(1)}%${p.with_extra_training ? " *" : ""}`),
      el("td", {}, p.pareto[axis] ? "✓" : ""),
      data.study ? el("td", { class: "study-trial" }, p.trial === null || p.trial === undefined ? "–"
        : el("a", { href: `/jobs/${p.job_id}`, title: `job ${p.job_id}` }, `trial ${p.trial}${p.study_pareto ? " ◆" : ""}`)) : "")));
  const head = document.querySelector("#comp-table thead tr");
  head.querySelector(".study-col")?.remove();
  if (data.study) head.append(el("th", { class: "study-col", title: "◆ on the study's Pareto front" }, "study trial"));
  document.getElementById("comp-count").textContent = data.points.length > TABLE_ROWS
    ? `(${data.points.length} for ${data.task}; the ${TABLE_ROWS} cheapest on this axis shown)` : `(${data.points.length} for ${data.task || "–"})`;
}

// The study's objectives and Pareto trials, each linked to its job.
function studyNote() {
  const note = document.getElementById("comp-study");
  note.hidden = !data.study;
  if (!data.study) return;
  const s = data.study;
  note.replaceChildren("Study ", el("a", { href: `/studies/${s.id}` }, s.name || s.id), ` (${s.status}): `,
    s.objectives.map((o, i) => `${s.directions[i] === "minimize" ? "minimise" : "maximise"} ${o}`).join(", "),
    `; ${s.pareto_trials.length} trial(s) on its Pareto front (◆): `,
    ...s.pareto_trials.flatMap((t, i) => [i ? ", " : "", el("a", { href: `/jobs/${t.job_id}` }, `trial ${t.number}`)]));
}

async function load() {
  const params = new URLSearchParams();
  for (const name of ["task", "sweep_id", "tag", "study"]) if (form.elements[name].value) params.set(name, form.elements[name].value);
  setQuery({ task: params.get("task") || "", sweep_id: params.get("sweep_id") || "", tag: params.get("tag") || "",
    study: params.get("study") || "", axis: form.elements.axis.value || query().get("axis") || "",
    y: form.elements.y.value || query().get("y") || "" });
  try {
    data = await api(`/api/v1/views/compression?${params}`);
    await plotlyReady();
    flash("");
  } catch (err) {
    flash(`compression: ${err.message}`);
    return;
  }
  fill(form.elements.task, data.tasks, null, data.task);
  // Size by default: quantizing keeps the parameter count, so on that axis an int8 model sits under its source.
  const current = form.elements.axis.value || query().get("axis") || "size_bytes";
  fill(form.elements.axis, data.axes.map((a) => a.key), data.axes.map((a) => a.label), current);
  fill(form.elements.sweep_id, ["", ...data.options.sweeps], ["all", ...data.options.sweeps], params.get("sweep_id") || "");
  const tagValues = Object.entries(data.options.tags).flatMap(([k, vs]) => vs.map((v) => `${k}=${v}`));
  fill(form.elements.tag, ["", ...tagValues], ["any", ...tagValues], params.get("tag") || "");
  const studies = [...new Set([...(data.options.tags.study_id || []), ...(params.get("study") ? [params.get("study")] : [])])];
  fill(form.elements.study, ["", ...studies], ["none", ...studies], params.get("study") || "");
  const y = form.elements.y.value || query().get("y") || "score";
  fill(form.elements.y, ["score", ...data.recipes.map((r) => `attack:${r}`)],
    ["score", ...data.recipes.map((r) => `accuracy under attack: ${r}`)], y);
  studyNote();
  robustnessNote();
  const empty = data.points.length === 0 && data.references.length === 0;
  document.getElementById("comp-empty").hidden = !empty;
  chart.hidden = empty;
  if (!empty) draw();
  table();
}

for (const name of ["task", "sweep_id", "tag", "study"]) {
  const value = query().get(name);
  if (value) { form.elements[name].append(el("option", { value }, value)); form.elements[name].value = value; }
  form.elements[name].addEventListener("change", load);
}
for (const name of ["axis", "logx", "y"]) {
  form.elements[name].addEventListener("change", () => {
    setQuery({ axis: form.elements.axis.value, y: form.elements.y.value });
    robustnessNote(); draw(); table();
  });
}
load();
