// Probing: per-layer curves per model × probe task overlaid, selectivity beside accuracy,
// structural-probe UUAS/Spearman, representation geometry, and an attention-head heatmap (layer × head).
import { PALETTE, api, el, flash, plotConfig, plotlyReady, query, setQuery } from "/static/js/api.js";

const form = document.getElementById("probe-filters");
const DASHES = ["solid", "dash", "dot", "dashdot", "longdash"];
let data = null;

function checked(boxId) {
  return new Set([...document.querySelectorAll(`#${boxId} input:checked`)].map((i) => i.value));
}

function boxes(boxId, values, selected) {
  document.getElementById(boxId).replaceChildren(...values.map((v) => el("label", { class: "check" },
    el("input", { type: "checkbox", value: v, checked: selected === null || selected.has(v), onchange: drawAll }), v)));
}

function visibleCurves() {
  const tasks = checked("task-boxes");
  const models = checked("model-boxes");
  return data.curves.filter((c) => tasks.has(c.probe_task) && models.has(c.model));
}

// x: the layer, or with "relative depth" the layer ÷ the model's last layer (0 = embeddings, 1 = top).
function relative() {
  return form.elements.relative.checked;
}

function xs(layers) {
  const depth = Math.max(1, ...layers);
  return relative() ? layers.map((l) => l / depth) : layers;
}

// One trace per model × task: a colour per model, a dash per probe task.
function traces(curves, metric) {
  return curves.filter((c) => c[metric]).map((c) => {
    const colour = PALETTE[data.models.indexOf(c.model) % PALETTE.length];
    const std = c[`${metric}_std`] || [];
    const extra = metric === "accuracy" && c.control_accuracy
      ? c.control_accuracy.map((v) => (v === null ? "" : `<br>control ${v.toFixed(3)}`)) : c.layers.map(() => "");
    return {
      type: "scatter", mode: "lines+markers", name: `${c.model} · ${c.probe_task}`, x: xs(c.layers), y: c[metric],
      error_y: std.some((s) => s !== null) ? { type: "data", array: std.map((s) => s ?? 0), visible: true, thickness: 1 } : undefined,
      line: { color: colour, dash: DASHES[data.probe_tasks.indexOf(c.probe_task) % DASHES.length] },
      marker: { color: colour, size: 6 },
      text: c.layers.map((l, i) => `${c.model} · ${c.probe_task}<br>layer ${l}: ${metric} ${c[metric][i] === null ? "–" : c[metric][i].toFixed(3)}${extra[i]}<br>${c.runs} run(s)`),
      hoverinfo: "text",
    };
  });
}

function layout(yTitle) {
  return { margin: { t: 10, r: 10, b: 45, l: 55 }, height: 360, hovermode: "closest",
    xaxis: relative() ? { title: { text: "relative depth (layer ÷ number of layers)" }, range: [-0.02, 1.02] }
      : { title: { text: "layer (0 = embeddings)" }, dtick: 1 },
    yaxis: { title: { text: yTitle } }, legend: { orientation: "h", y: -0.2 } };
}

function plot(id, curves, metric, title) {
  Plotly.react(id, traces(curves, metric), layout(title), plotConfig(`probing-${id.replace(/-chart$/, "")}`));
}

function drawHeatmap() {
  const runKey = document.getElementById("heat-run").value;
  const stat = document.getElementById("heat-stat").value;
  const map = data.heatmaps.find((h) => `${h.model}|${h.probe_task}` === runKey && h.statistic === stat)
    || data.heatmaps.find((h) => `${h.model}|${h.probe_task}` === runKey);
  if (!map) return;
  const heads = Math.max(...map.values.map((r) => r.length));
  Plotly.react("heatmap-chart", [{
    type: "heatmap", z: map.values, x: [...Array(heads).keys()], y: [...Array(map.values.length).keys()],
    colorscale: "Viridis", colorbar: { title: { text: map.statistic } },
    hovertemplate: "layer %{y}, head %{x}: %{z}<extra></extra>",
  }], { margin: { t: 10, r: 10, b: 45, l: 55 }, height: 40 + 28 * Math.max(6, map.values.length),
    xaxis: { title: { text: "head" }, dtick: 1 }, yaxis: { title: { text: "layer" }, dtick: 1, autorange: "reversed" } },
  plotConfig("probing-heads"));
}

function drawAll() {
  const curves = visibleCurves();
  setQuery({ tasks: [...checked("task-boxes")].join(","), models: [...checked("model-boxes")].join(","), depth: relative() ? "relative" : "" });
  plot("accuracy-chart", curves, "accuracy", "probe accuracy (0–1)");
  plot("selectivity-chart", curves, "selectivity", "selectivity (accuracy − control, 0–1)");
  const structural = curves.filter((c) => c.uuas || c.spearman);
  document.getElementById("structural").hidden = structural.length === 0;
  if (structural.length) {
    plot("uuas-chart", structural, "uuas", "UUAS (0–1)");
    plot("spearman-chart", structural, "spearman", "Spearman ρ (−1–1; distance; depth: norm)");
  }
  const geometry = curves.filter((c) => c.anisotropy);
  document.getElementById("geometry").hidden = geometry.length === 0;
  if (geometry.length) {
    // every geometry task records its layers' anisotropy: one curve per model is enough
    const own = geometry.filter((c) => c.probe_task === "anisotropy");
    plot("anisotropy-chart", own.length ? own : geometry, "anisotropy", "anisotropy (mean cosine of random words)");
    plot("self-similarity-chart", geometry, "self_similarity_adjusted", "self-similarity − anisotropy");
    plot("intra-similarity-chart", geometry, "intra_sentence_similarity_adjusted", "intra-sentence similarity − anisotropy");
  }
  const models = checked("model-boxes");
  const cloze = (data.cloze || []).filter((r) => models.has(r.model));
  document.getElementById("cloze").hidden = cloze.length === 0;
  const fmt = (v) => (v === null || v === undefined ? "–" : Number.isInteger(v) ? String(v) : v.toFixed(3));
  document.querySelector("#cloze-table tbody").replaceChildren(...cloze.map((r) => el("tr", {},
    ...[r.model, r.relation, r.facts, r.oov, r.scored, r.p_at_1, r.p_at_10, r.mrr].map((v) => el("td", {}, typeof v === "string" ? v : fmt(v))))));
  const maps = data.heatmaps.filter((h) => checked("task-boxes").has(h.probe_task) && checked("model-boxes").has(h.model));
  document.getElementById("heads").hidden = maps.length === 0;
  if (maps.length) {
    const runSel = document.getElementById("heat-run");
    const keys = [...new Set(maps.map((h) => `${h.model}|${h.probe_task}`))];
    const keep = runSel.value;
    runSel.replaceChildren(...keys.map((k) => el("option", { value: k }, k.replace("|", " · "))));
    if (keys.includes(keep)) runSel.value = keep;
    const statSel = document.getElementById("heat-stat");
    const stats = [...new Set(maps.filter((h) => `${h.model}|${h.probe_task}` === runSel.value).map((h) => h.statistic))];
    const keepStat = statSel.value;
    statSel.replaceChildren(...stats.map((s) => el("option", { value: s }, s)));
    if (stats.includes(keepStat)) statSel.value = keepStat;
    drawHeatmap();
  }
}

async function load() {
  const params = new URLSearchParams();
  for (const name of ["sweep_id", "tag"]) if (form.elements[name].value) params.set(name, form.elements[name].value);
  try {
    data = await api(`/api/v1/views/probing?${params}`);
    await plotlyReady();
    flash("");
  } catch (err) {
    flash(`probing: ${err.message}`);
    return;
  }
  const fromUrl = (k) => (query().get(k) ? new Set(query().get(k).split(",")) : null);
  boxes("task-boxes", data.probe_tasks, fromUrl("tasks"));
  boxes("model-boxes", data.models, fromUrl("models"));
  for (const [name, values] of [["sweep_id", data.options.sweeps],
    ["tag", Object.entries(data.options.tags).flatMap(([k, vs]) => vs.map((v) => `${k}=${v}`))]]) {
    const current = params.get(name) || "";
    form.elements[name].replaceChildren(el("option", { value: "" }, name === "tag" ? "any" : "all"), ...values.map((v) => el("option", { value: v }, v)));
    form.elements[name].value = current;
  }
  setQuery({ sweep_id: params.get("sweep_id") || "", tag: params.get("tag") || "" });
  const empty = data.curves.length === 0 && data.heatmaps.length === 0 && !(data.cloze || []).length;
  document.getElementById("probe-empty").hidden = !empty;
  document.getElementById("probe-charts").hidden = empty;
  if (!empty) drawAll();
}

for (const name of ["sweep_id", "tag"]) {
  const value = query().get(name);
  if (value) { form.elements[name].append(el("option", { value }, value)); form.elements[name].value = value; }
  form.elements[name].addEventListener("change", load);
}
document.getElementById("heat-run").addEventListener("change", () => drawAll());
form.elements.relative.checked = query().get("depth") === "relative";
form.elements.relative.addEventListener("change", () => { if (data) drawAll(); });
document.getElementById("heat-stat").addEventListener("change", drawHeatmap);
load();
