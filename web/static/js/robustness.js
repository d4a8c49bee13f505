// Robustness: accuracy under attack per recipe, per attacked model (ptmlab.views.robustness), a
// grouped bar chart and a table with one column group per recipe; filtered by pipeline, task, sweep, tag.
import { PALETTE, api, el, flash, fmt, plotConfig, plotlyReady, query, setQuery } from "/static/js/api.js";

const form = document.getElementById("rob-filters");
const chart = document.getElementById("rob-chart");
const FILTERS = ["pipeline", "task", "sweep_id", "tag"];
const METRICS = [["accuracy_under_attack", "under attack"], ["success_rate", "success"], ["perturbed_word_ratio", "perturbed"]];
let data = null;

function fill(select, values, labels, current) {
  select.replaceChildren(...values.map((v, i) => el("option", { value: v }, labels ? labels[i] : v)));
  if (values.includes(current)) select.value = current;
}

function draw() {
  const c = data.chart;
  const traces = [{ type: "bar", name: "clean", x: c.models, y: c.clean, marker: { color: "#bbb" },
    hovertemplate: "%{x}<br>clean accuracy %{y:.4f}<extra></extra>" }];
  data.recipes.forEach((recipe, i) => traces.push({
    type: "bar", name: recipe, x: c.models, y: c.recipes[recipe], marker: { color: PALETTE[i % PALETTE.length] },
    hovertemplate: `%{x}<br>${recipe}: accuracy under attack %{y:.4f}<extra></extra>`,
  }));
  Plotly.react(chart, traces, {
    barmode: "group", margin: { t: 20, r: 20, b: 90, l: 60 }, height: 420,
    yaxis: { title: { text: "accuracy (0–1)" }, range: [0, 1] }, legend: { orientation: "h", y: 1.08 },
  }, plotConfig("robustness"));
}

function table() {
  const head = document.querySelector("#rob-table thead");
  head.replaceChildren(
    el("tr", {}, el("th", { rowspan: "2" }, "model"), el("th", { rowspan: "2" }, "made by"), el("th", { rowspan: "2" }, "task"),
      el("th", { rowspan: "2" }, "clean"),
      ...data.recipes.map((r) => el("th", { colspan: String(METRICS.length + 1), class: "recipe-group" }, r))),
    el("tr", {}, ...data.recipes.flatMap(() => [...METRICS.map(([, label]) => el("th", {}, label)), el("th", {}, "sample")])));
  document.querySelector("#rob-table tbody").replaceChildren(...data.rows.map((m) => el("tr", { "data-source": m.source },
    el("td", { title: m.source }, m.job_id ? el("a", { href: `/jobs/${m.job_id}` }, m.display) : m.display),
    el("td", {}, m.made_by.text), el("td", {}, m.task),
    el("td", { class: "num", title: m.same_sample ? "" : "the recipes' samples differ: each recipe's own clean accuracy is in its hover" },
      `${fmt(m.clean_accuracy, 4)}${m.same_sample ? "" : " *"}`),
    ...data.recipes.flatMap((r) => {
      const e = m.recipes[r];
      if (!e) return [...METRICS.map(() => el("td", { class: "num" }, "–")), el("td", {}, "")];
      const title = `clean ${fmt(e.clean_accuracy, 4)}, ${e.queries === null ? "–" : fmt(e.queries, 1)} queries per example` +
        (e.runs > 1 ? `; latest of ${e.runs} results` : "");
      return [...METRICS.map(([key]) => el("td", { class: "num", "data-recipe": r, "data-metric": key, title },
        key === "accuracy_under_attack" ? el("a", { href: e.job_id ? `/jobs/${e.job_id}` : `/runs/${e.result_id}` }, fmt(e[key], 4)) : fmt(e[key], 4))),
        el("td", { class: "small" }, `${e.num_examples ?? "?"} ex., seed ${e.seed ?? "?"}`)];
    }))));
  document.getElementById("rob-count").textContent = `(${data.rows.length} models, ${data.result_count} attack results)`;
}

async function load() {
  const params = new URLSearchParams();
  for (const name of FILTERS) if (form.elements[name].value) params.set(name, form.elements[name].value);
  setQuery(Object.fromEntries(FILTERS.map((n) => [n, params.get(n) || ""])));
  try {
    data = await api(`/api/v1/views/robustness?${params}`);
    await plotlyReady();
    flash("");
  } catch (err) {
    flash(`robustness: ${err.message}`);
    return;
  }
  const pipes = data.options.pipelines;
  fill(form.elements.pipeline, ["", ...pipes.map((p) => p.id)], ["all", ...pipes.map((p) => `${p.name} (${p.id})`)], params.get("pipeline") || "");
  fill(form.elements.task, ["", ...data.tasks], ["all", ...data.tasks], params.get("task") || "");
  fill(form.elements.sweep_id, ["", ...data.options.sweeps], ["all", ...data.options.sweeps], params.get("sweep_id") || "");
  const tagValues = Object.entries(data.options.tags).flatMap(([k, vs]) => vs.map((v) => `${k}=${v}`));
  fill(form.elements.tag, ["", ...tagValues], ["any", ...tagValues], params.get("tag") || "");
  const empty = data.rows.length === 0;
  document.getElementById("rob-empty").hidden = !empty;
  chart.hidden = empty;
  if (!empty) draw();
  table();
}

for (const name of FILTERS) {
  const value = query().get(name);
  if (value) { form.elements[name].append(el("option", { value }, value)); form.elements[name].value = value; }
  form.elements[name].addEventListener("change", load);
}
load();
