// Probe drift: a source model's per-layer probe curve and those of its probed descendants
// (fine-tuned, compressed), then each one's difference to the source per layer.
import { PALETTE, api, el, flash, plotConfig, plotlyReady, query, setQuery } from "/static/js/api.js";

const source = document.getElementById("drift-source");
const task = document.getElementById("drift-task");
const metric = document.getElementById("drift-metric");

function label(c) { return `${c.name} (${c.stage}, job ${c.job_id})`; }

function draw(view) {
  document.getElementById("drift-empty").hidden = view.curves.length > 0;
  task.replaceChildren(...view.tasks.map((t) => el("option", { value: t }, t)));
  task.value = view.task || "";
  const colour = (i) => PALETTE[i % PALETTE.length];
  const layers = [...new Set(view.curves.flatMap((c) => c.layers))].sort((a, b) => a - b);
  Plotly.react("drift-chart", view.curves.map((c, i) => ({
    type: "scatter", mode: "lines+markers", name: label(c), x: c.layers, y: c.values,
    line: { color: colour(i), width: c.job_id === view.source.job_id ? 3 : 2, dash: c.depth > 1 ? "dot" : "solid" },
  })), { height: 340, margin: { t: 30, r: 10, b: 40, l: 55 }, title: { text: `${view.task} ${view.metric} by layer`, font: { size: 13 } },
    xaxis: { title: { text: "layer (0 = embeddings)" }, dtick: 1 }, yaxis: { title: { text: `${view.metric} (${view.metric === "spearman" ? "−1–1" : "0–1"})` } }, legend: { orientation: "h", y: -0.2 } },
  plotConfig(`probe-drift-${view.source.job_id}-${view.task}`));
  const others = view.curves.filter((c) => c.job_id !== view.source.job_id);
  if (view.has_reference && others.length) {
    Plotly.react("drift-diff", others.map((c) => ({
      type: "bar", name: label(c), x: c.layers, y: c.diff,
      marker: { color: colour(view.curves.indexOf(c)) },
    })), { height: 260, margin: { t: 30, r: 10, b: 40, l: 55 }, barmode: "group",
      title: { text: `difference to ${view.source.name || "the source"} per layer`, font: { size: 13 } },
      xaxis: { title: { text: "layer" }, dtick: 1 }, yaxis: { title: { text: `Δ ${view.metric}` }, zeroline: true }, showlegend: false },
    plotConfig(`probe-drift-diff-${view.source.job_id}-${view.task}`));
  } else {
    Plotly.purge("drift-diff");
  }
  const table = document.getElementById("drift-table");
  table.hidden = !view.curves.length;
  table.querySelector("thead").replaceChildren(el("tr", {}, el("th", {}, "model"), layers.map((l) => el("th", {}, `layer ${l}`))));
  table.querySelector("tbody").replaceChildren(...view.curves.map((c) => el("tr", { "data-job-id": c.job_id },
    el("td", {}, el("a", { href: `/jobs/${c.job_id}` }, label(c))),
    layers.map((l) => {
      const i = c.layers.indexOf(l);
      if (i < 0) return el("td", {}, "");
      const d = c.diff && c.diff[i] !== null && c.job_id !== view.source.job_id ? ` (${c.diff[i] >= 0 ? "+" : ""}${c.diff[i].toFixed(3)})` : "";
      return el("td", { class: "num" }, c.values[i].toFixed(3) + d);
    }))));
}

async function load() {
  if (!source.value) return;
  setQuery({ source: source.value, task: task.value, metric: metric.value });
  const p = new URLSearchParams({ source: source.value, metric: metric.value });
  if (task.value) p.set("task", task.value);
  try {
    const view = await api(`/api/v1/views/probe-drift?${p}`);
    await plotlyReady();
    draw(view);
    flash("");
  } catch (err) {
    flash(`probe drift: ${err.message}`);
  }
}

async function init() {
  const { sources } = await api("/api/v1/views/probe-drift");
  source.append(...sources.map((s) => el("option", { value: s.job_id }, `${s.name} (${s.stage}, job ${s.job_id})`)));
  const q = query();
  if (q.get("metric")) metric.value = q.get("metric");
  if (q.get("source")) source.value = q.get("source");
  if (q.get("task")) task.append(el("option", { value: q.get("task") }, q.get("task")));
  if (q.get("task")) task.value = q.get("task");
  source.addEventListener("change", () => { task.replaceChildren(); load(); });  // its own tasks
  for (const input of [task, metric]) input.addEventListener("change", load);
  load();
}
init().catch((err) => flash(err.message));
