// Run detail and comparison: headline numbers and configs side by side (differences marked),
// metric curves overlaid from MLflow's metric history.
import { PALETTE, api, badge, columnFormat, el, flash, fmtNamed, setQuery } from "/static/js/api.js";
import { CurveCharts } from "/static/js/curves.js";

const root = document.getElementById("compare");
const single = root.dataset.single === "true";
let view = null;
let curves = null;
let charts = null;  // the CurveCharts of the curves section

function idsOf(text) {
  return (text || "").split(",").map((s) => s.trim()).filter(Boolean);
}

// Runs are named by their jobs (`jobs=14,13`); `runs=` (result ids) only for results recorded by hand.
function ids() {
  return [...idsOf(root.dataset.jobs), ...idsOf(root.dataset.runs)];
}

function query() {
  const p = new URLSearchParams();
  if (idsOf(root.dataset.jobs).length) p.set("jobs", idsOf(root.dataset.jobs).join(","));
  if (idsOf(root.dataset.runs).length) p.set("runs", idsOf(root.dataset.runs).join(","));
  return p.toString().replaceAll("%2C", ",");
}

function signed(v, digits = 4) {
  if (v === null || v === undefined) return "–";
  const text = Math.abs(v) >= 1000 ? v.toFixed(0) : Number(v.toPrecision(digits)).toString();
  return v > 0 ? `+${text}` : text;
}

// The answer first: each run's main score and the numbers that differ, with their difference from
// the first run (Δ) and that difference in percent of it (Δ%).
function renderAnswer() {
  const table = document.getElementById("answer-table");
  const main = view.main;
  document.getElementById("answer-title").textContent = main.metric ? `Main score: ${main.metric}` : "Main score";
  table.querySelector("thead").replaceChildren(el("tr", {}, el("th", {}, "metric"),
    view.runs.map((r, i) => el("th", { style: `border-bottom: 3px solid ${colour(i)}` }, r.name))));
  // numbers as the runs table shows them: scores with four decimals, sizes and counts in their units
  const rowOf = (m, cls, mark = () => "") => {
    const format = columnFormat(m.key, m.values);
    return el("tr", { class: cls, "data-key": m.key }, el("td", { class: "mono" }, m.key),
    m.values.map((v, i) => el("td", { class: "num" }, typeof v === "number" ? format(v) : value(v), mark(i),
      i > 0 && m.delta[i] !== null ? el("span", { class: "delta small" },
        ` Δ ${signed(m.delta[i])}${m.delta_pct[i] !== null ? ` (${signed(m.delta_pct[i], 3)}%)` : ""}`) : "")));
  };
  // a run at or below its task's majority-class baseline is marked beside its main score
  const degenerate = (i) => {
    const d = view.runs[i].degenerate;
    return d ? el("span", { class: "flagged small", title: `at or below the majority-class baseline (${d.metric})` },
      ` ⚠ ≤ baseline ${fmtNamed(d.metric, d.baseline)}`) : "";
  };
  const rows = [rowOf({ ...main, key: main.metric ? `main_score (${main.metric})` : "main_score" }, "main", degenerate)];
  for (const m of view.metrics) rows.push(rowOf(m, "differs"));
  if (!view.metrics.length) rows.push(el("tr", {}, el("td", { colspan: view.runs.length + 1, class: "empty" }, "No other number differs.")));
  table.querySelector("tbody").replaceChildren(...rows);
}

function value(v) {
  if (v === undefined) return "";
  if (v === null) return "null";
  return typeof v === "object" ? JSON.stringify(v) : typeof v === "number" && !Number.isInteger(v) ? v.toPrecision(5) : String(v);
}

function colour(i) {
  return PALETTE[i % PALETTE.length];
}

function sideTable(tableId, keys, rowOf, differing) {
  const table = document.getElementById(tableId);
  table.querySelector("thead").replaceChildren(el("tr", {}, el("th", {}, "key"),
    view.runs.map((r, i) => el("th", { style: `border-bottom: 3px solid ${colour(i)}` }, r.name))));
  table.querySelector("tbody").replaceChildren(...keys.map((k) => el("tr", { class: differing.has(k) ? "differs" : "", "data-key": k },
    el("td", { class: "mono" }, k), view.runs.map((r) => el("td", { class: "mono" }, value(rowOf(r)[k]))))));
}

function renderRuns() {
  document.getElementById("runs-section").hidden = false;
  const table = document.getElementById("runs-table");
  table.querySelector("thead").replaceChildren(el("tr", {}, ["", "run", "job", "sweep", "MLflow", "run folder"].map((h) => el("th", {}, h))));
  table.querySelector("tbody").replaceChildren(...view.runs.map((r, i) => el("tr", {},
    el("td", {}, el("span", { class: "swatch", style: `background:${colour(i)}` })),
    el("td", {}, r.job_id ? el("a", { href: `/jobs/${r.job_id}` }, r.label) : r.label),
    el("td", {}, r.job_id ? [el("a", { href: `/jobs/${r.job_id}` }, `job ${r.job_id}`), " ", r.job_status ? badge(r.job_status) : ""] : "–"),
    el("td", {}, r.sweep_id ? el("a", { href: `/jobs?sweep_id=${r.sweep_id}` }, r.sweep_id) : "–"),
    el("td", {}, r.mlflow_url ? el("a", { href: r.mlflow_url, target: "_blank", rel: "noopener" }, r.mlflow_run_id.slice(0, 12)) : "–"),
    el("td", { class: "mono small" }, r.run_dir || "–"))));
  const numberDiff = new Set(view.number_keys.filter((k) => new Set(view.runs.map((r) => value(r.numbers[k]))).size > 1));
  sideTable("numbers-table", view.number_keys, (r) => r.numbers, single ? new Set() : numberDiff);
  renderAnswer();
  renderLayers();
  renderConfig();
}

// Probe runs: their per-layer scores, a row per layer and run.
function renderLayers() {
  const withLayers = view.runs.filter((r) => r.layers.length);
  document.getElementById("layers-section").hidden = !withLayers.length;
  if (!withLayers.length) return;
  const keys = [...new Set(withLayers.flatMap((r) => r.layers.flatMap((e) => Object.keys(e))))].filter((k) => k !== "layer");
  const table = document.getElementById("layers-table");
  table.querySelector("thead").replaceChildren(el("tr", {}, el("th", {}, "run"), el("th", {}, "layer"), keys.map((k) => el("th", {}, k))));
  table.querySelector("tbody").replaceChildren(...withLayers.flatMap((r) => r.layers.map((e, i) => el("tr", {},
    el("td", {}, r.name), el("td", {}, e.layer ?? i), keys.map((k) => el("td", { class: "num" }, value(e[k])))))));
}

function renderConfig() {
  const onlyDiff = document.getElementById("only-diff").checked;
  const differing = new Set(view.differing);
  const keys = onlyDiff ? view.config_keys.filter((k) => differing.has(k)) : view.config_keys;
  sideTable("config-table", keys, (r) => view.configs[String(r.result_id)], single ? new Set() : differing);
  document.getElementById("diff-info").textContent = single
    ? `(from ${view.runs[0].config_source})`
    : `${view.differing.length} of ${view.config_keys.length} keys differ (${[...new Set(view.runs.map((r) => r.config_source))].join(", ")})`;
}

// Curves (metrics with more than one point for some run) in the dashboard's chart component
// (curves.js: a chart per metric, grouped by prefix, validation first, none capped), one colour per
// run as in the runs table; one-point metrics (a compress stage's measurements) in a table instead.
// Lightning's `epoch` metric and pretraining's `train/tokens_seen` are the epoch and tokens x-axes.
const AXIS_METRICS = { epoch: "epoch", "train/tokens_seen": "tokens" };

function runSeries() {
  return view.runs.map((r, i) => {
    const byStep = new Map();
    for (const [key, perRun] of Object.entries(curves.curves)) {
      const c = perRun.find((x) => x.result_id === r.result_id);
      if (!c) continue;
      c.steps.forEach((step, j) => {
        if (!byStep.has(step)) byStep.set(step, { step });
        const point = byStep.get(step);
        point[AXIS_METRICS[key] || key] = c.values[j];
        const t = c.times?.[j];
        if (t != null) point.time_s = point.time_s == null ? t : Math.min(point.time_s, t);
      });
    }
    const points = [...byStep.values()].sort((a, b) => a.step - b.step);
    const last = {};  // an axis value holds until the next one logged (validation steps log no epoch of their own)
    for (const p of points) {
      for (const axis of Object.values(AXIS_METRICS)) {
        if (p[axis] != null) last[axis] = p[axis];
        else if (last[axis] != null) p[axis] = last[axis];
      }
    }
    return { label: r.name, colour: colour(i), points };
  });
}

function renderCurves() {
  const keys = Object.keys(curves.curves).filter((k) => !(k in AXIS_METRICS));
  const isCurve = (k) => curves.curves[k].some((c) => c.steps.length > 1);
  const onePoint = keys.filter((k) => !isCurve(k));
  const nameOf = Object.fromEntries(view.runs.map((r) => [String(r.result_id), r.name]));
  const errors = Object.entries(curves.errors).map(([id, msg]) => `${nameOf[id] ?? id}: ${msg}`);
  document.getElementById("curve-errors").textContent = errors.join(" · ");
  document.getElementById("one-point").replaceChildren(onePoint.length ? singleTable(onePoint) : "");
  const box = document.getElementById("curves");
  if (!keys.some(isCurve)) {
    charts = null;
    box.replaceChildren(el("p", { class: "empty" }, onePoint.length ? "No curves: one point per metric (the table below)."
      : "No metric history for these runs."));
    return;
  }
  const series = runSeries().map((s) => ({ ...s, points: s.points.map((p) => Object.fromEntries(Object.entries(p)
    .filter(([k]) => !onePoint.includes(k)))) }));
  charts ??= new CurveCharts(box, { filename: single ? `run-${ids()[0]}` : "compare" });
  charts.draw(series);
}

function singleTable(keys) {
  const ids = view.runs.map((r) => r.result_id);
  return el("table", { class: "grid small", id: "single-metrics" },
    el("thead", {}, el("tr", {}, el("th", {}, "metric (one point)"), view.runs.map((r) => el("th", {}, r.name)))),
    el("tbody", {}, keys.map((k) => el("tr", { "data-metric": k }, el("td", { class: "mono" }, k), ids.map((id) => {
      const c = curves.curves[k].find((x) => x.result_id === id);
      return el("td", { class: "num" }, c ? value(c.values.at(-1)) : "–");
    })))));
}

async function showPicker() {
  const overview = await api("/api/v1/views/overview");
  document.getElementById("pick").hidden = false;
  document.querySelector("#pick-table tbody").replaceChildren(...overview.results.map((r) => el("tr", {},
    el("td", {}, r.job_id ? el("input", { type: "checkbox", value: r.job_id }) : ""),
    el("td", {}, r.job_id ? el("a", { href: `/jobs/${r.job_id}` }, `#${r.job_id}`) : `result ${r.id}`),
    el("td", {}, r.kind), el("td", {}, r.label),
    el("td", { class: "mono small" }, Object.entries(r.headline).map(([k, v]) => `${k}=${Number(v).toPrecision(4)}`).join(", ")))));
  if (!overview.results.length) document.getElementById("pick").replaceChildren(el("p", { class: "empty" }, "No results yet."));
}

async function load() {
  if (!ids().length) return showPicker();
  try {
    view = await api(`/api/v1/views/compare?${query()}`);
  } catch (err) {
    flash(err.message);
    return;
  }
  document.getElementById("only-diff").checked = !single && view.runs.length > 1;
  renderRuns();
  charts = null;
  document.getElementById("curves").replaceChildren(el("p", { class: "empty" }, "loading curves from MLflow…"));
  try {
    curves = await api(`/api/v1/views/curves?${query()}`);
    renderCurves();
  } catch (err) {
    document.getElementById("curves").replaceChildren(el("p", { class: "error" }, `curves: ${err.message}`));
  }
}

document.getElementById("compare-form").addEventListener("submit", (event) => {
  event.preventDefault();
  root.dataset.jobs = event.target.elements.jobs.value;
  root.dataset.runs = "";
  setQuery({ jobs: root.dataset.jobs, runs: null });
  load();
});
document.getElementById("pick-button").addEventListener("click", () => {
  const chosen = [...document.querySelectorAll("#pick-table input:checked")].map((i) => i.value);
  if (chosen.length) window.location.href = `/compare?jobs=${chosen.join(",")}`;
});
document.getElementById("only-diff").addEventListener("change", renderConfig);
load();
