// Run detail and comparison: headline numbers and configs side by side (differences marked),
// metric curves overlaid from MLflow's metric history.
import { PALETTE, api, badge, el, flash, plotConfig, setQuery } from "/static/js/api.js";

const root = document.getElementById("compare");
const single = root.dataset.single === "true";
const MAX_CHARTS = 12;  // small charts per page of the curves section
let chartsShown = MAX_CHARTS;
let view = null;
let curves = null;

function ids() {
  return (root.dataset.runs || "").split(",").map((s) => s.trim()).filter(Boolean);
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
    view.runs.map((r, i) => el("th", { style: `border-bottom: 3px solid ${colour(i)}` }, `#${r.result_id}`))));
  table.querySelector("tbody").replaceChildren(...keys.map((k) => el("tr", { class: differing.has(k) ? "differs" : "", "data-key": k },
    el("td", { class: "mono" }, k), view.runs.map((r) => el("td", { class: "mono" }, value(rowOf(r)[k]))))));
}

function renderRuns() {
  document.getElementById("runs-section").hidden = false;
  const table = document.getElementById("runs-table");
  table.querySelector("thead").replaceChildren(el("tr", {}, ["", "run", "job", "sweep", "MLflow", "run folder"].map((h) => el("th", {}, h))));
  table.querySelector("tbody").replaceChildren(...view.runs.map((r, i) => el("tr", {},
    el("td", {}, el("span", { class: "swatch", style: `background:${colour(i)}` })),
    el("td", {}, single ? r.label : el("a", { href: `/runs/${r.result_id}` }, r.label)),
    el("td", {}, r.job_id ? [el("a", { href: `/jobs/${r.job_id}` }, `job ${r.job_id}`), " ", r.job_status ? badge(r.job_status) : ""] : "–"),
    el("td", {}, r.sweep_id ? el("a", { href: `/jobs?sweep_id=${r.sweep_id}` }, r.sweep_id) : "–"),
    el("td", {}, r.mlflow_url ? el("a", { href: r.mlflow_url, target: "_blank", rel: "noopener" }, r.mlflow_run_id.slice(0, 12)) : "–"),
    el("td", { class: "mono small" }, r.run_dir || "–"))));
  const numberDiff = new Set(view.number_keys.filter((k) => new Set(view.runs.map((r) => value(r.numbers[k]))).size > 1));
  sideTable("numbers-table", view.number_keys, (r) => r.numbers, single ? new Set() : numberDiff);
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
    el("td", {}, `#${r.result_id}`), el("td", {}, e.layer ?? i), keys.map((k) => el("td", { class: "num" }, value(e[k])))))));
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

// Curves (metrics with more than one point per run) as small charts, validation first (the server's
// order), a page at a time with "more" below — none hidden; one-point metrics (a compress stage's
// measurements) in a table instead of a chart each.
function renderCurves() {
  const box = document.getElementById("curves");
  const filter = document.getElementById("curve-filter").value.trim().toLowerCase();
  const keys = Object.keys(curves.curves).filter((k) => !filter || k.toLowerCase().includes(filter));
  const isCurve = (k) => curves.curves[k].some((c) => c.steps.length > 1);
  const charted = keys.filter(isCurve);
  const single = keys.filter((k) => !isCurve(k));
  const errors = Object.entries(curves.errors).map(([id, msg]) => `#${id}: ${msg}`);
  document.getElementById("curve-info").textContent = [
    `${charted.length} curves${single.length ? `, ${single.length} one-point metrics in the table below` : ""}`, ...errors]
    .filter(Boolean).join(" · ");
  const shown = charted.slice(0, chartsShown);
  box.replaceChildren(...shown.map((k) => el("div", { class: "chart small-chart", "data-metric": k })));
  if (!keys.length) box.replaceChildren(el("p", { class: "empty" }, "No metric history for these runs."));
  if (charted.length > shown.length) {
    box.append(el("p", { class: "more" }, el("button", { type: "button", id: "more-curves", onclick: () => {
      chartsShown += MAX_CHARTS;
      renderCurves();
    } }, `show ${Math.min(MAX_CHARTS, charted.length - shown.length)} more of ${charted.length - shown.length}`)));
  }
  if (single.length) box.append(singleTable(single));
  for (const div of box.querySelectorAll(".small-chart[data-metric]")) {
    const key = div.dataset.metric;
    const traces = curves.curves[key].map((c) => {
      const i = view.runs.findIndex((r) => r.result_id === c.result_id);
      return { type: "scatter", mode: c.steps.length > 1 ? "lines" : "markers", name: `#${c.result_id}`, x: c.steps, y: c.values,
        line: { color: colour(i) }, marker: { color: colour(i) } };
    });
    const big = Math.max(...curves.curves[key].flatMap((c) => c.values.map(Math.abs))) >= 1e4;
    Plotly.react(div, traces, { title: { text: key, font: { size: 13 } }, height: 280, margin: { t: 30, r: 10, b: 35, l: 55 },
      xaxis: { title: { text: "step" } }, yaxis: { tickformat: big ? "~s" : "" },
      showlegend: true, legend: { orientation: "h", y: -0.25, font: { size: 10 } } },
    plotConfig(`compare-${key.replace(/\W+/g, "_")}`));
  }
}

function singleTable(keys) {
  const ids = view.runs.map((r) => r.result_id);
  return el("table", { class: "grid small", id: "single-metrics" },
    el("thead", {}, el("tr", {}, el("th", {}, "metric (one point)"), ids.map((id) => el("th", {}, `#${id}`)))),
    el("tbody", {}, keys.map((k) => el("tr", { "data-metric": k }, el("td", { class: "mono" }, k), ids.map((id) => {
      const c = curves.curves[k].find((x) => x.result_id === id);
      return el("td", { class: "num" }, c ? value(c.values.at(-1)) : "–");
    })))));
}

async function showPicker() {
  const overview = await api("/api/v1/views/overview");
  document.getElementById("pick").hidden = false;
  document.querySelector("#pick-table tbody").replaceChildren(...overview.results.map((r) => el("tr", {},
    el("td", {}, el("input", { type: "checkbox", value: r.id })), el("td", {}, el("a", { href: `/runs/${r.id}` }, `#${r.id}`)),
    el("td", {}, r.kind), el("td", {}, r.job_id ? el("a", { href: `/jobs/${r.job_id}` }, r.job_id) : ""), el("td", {}, r.label),
    el("td", { class: "mono small" }, Object.entries(r.headline).map(([k, v]) => `${k}=${Number(v).toPrecision(4)}`).join(", ")))));
  if (!overview.results.length) document.getElementById("pick").replaceChildren(el("p", { class: "empty" }, "No results yet."));
}

async function load() {
  if (!ids().length) return showPicker();
  try {
    view = await api(`/api/v1/views/compare?runs=${ids().join(",")}`);
  } catch (err) {
    flash(err.message);
    return;
  }
  document.getElementById("only-diff").checked = !single && view.runs.length > 1;
  renderRuns();
  document.getElementById("curves").replaceChildren(el("p", { class: "empty" }, "loading curves from MLflow…"));
  try {
    curves = await api(`/api/v1/views/curves?runs=${ids().join(",")}`);
    renderCurves();
  } catch (err) {
    document.getElementById("curves").replaceChildren(el("p", { class: "error" }, `curves: ${err.message}`));
  }
}

document.getElementById("compare-form").addEventListener("submit", (event) => {
  event.preventDefault();
  root.dataset.runs = event.target.elements.runs.value;
  setQuery({ runs: root.dataset.runs });
  load();
});
document.getElementById("pick-button").addEventListener("click", () => {
  const chosen = [...document.querySelectorAll("#pick-table input:checked")].map((i) => i.value);
  if (chosen.length) window.location.href = `/compare?runs=${chosen.join(",")}`;
});
document.getElementById("only-diff").addEventListener("change", renderConfig);
document.getElementById("curve-filter").addEventListener("input", () => curves && renderCurves());
load();
