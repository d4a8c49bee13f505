// A study's page: its trials, the optimisation history, every trial's intermediate values (the
// pruned ones beside the survivors), the parameters against the objective and Optuna's parameter
// importances, the objective per searched value (mean ± std) and the top runs' validation curves,
// all from /api/v1/views/studies/{id}; polled while the study runs. A trial whose run sits at or
// below its task's majority-class baseline is marked degenerate, and a degenerate best is a
// warning, not a success. A multi-objective
// study: one column per objective, its Pareto-optimal trials marked (◆) and its Pareto front drawn
// instead of the history and the curves; the parameter charts show its first objective.
import { api, badge, el, flash, human, plotConfig, poll } from "/static/js/api.js";
import { degenerateWarning, num, perValueTables, topCurves } from "/static/js/params_view.js";

const studyId = document.getElementById("study").dataset.studyId;
const STATE_COLOUR = { complete: "#1a7f37", pruned: "#cf222e", running: "#1f6feb" };
const LAYOUT = { height: 320, margin: { t: 20, r: 10, b: 45, l: 60 } };

function value(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(4);
  return String(v);
}

// The objective the single-objective charts show: a multi-objective study's first.
const firstObjective = (view) => view.objective || view.objectives[0];
const firstValue = (view, t) => (view.objectives ? (t.values ? t.values[0] : null) : t.value);
// The runs of the study's trials by trial number (their degenerate marks and baselines).
const runOf = (view, t) => (view.runs || []).find((r) => r.number === t.number);
const bestIsDegenerate = (view) => Boolean(view.best_run && view.best_run.degenerate);

function trialsTable(view) {
  const table = document.getElementById("study-trials");
  const names = view.params.map((p) => p.name);
  const multi = Boolean(view.objectives);
  table.querySelector("thead").replaceChildren(el("tr", {}, el("th", {}, "trial"), el("th", {}, "state"),
    names.map((n) => el("th", { class: "mono" }, n)),
    multi ? [...view.objectives.map((o, i) => el("th", {}, `${o} (${view.directions[i] === "minimize" ? "↓" : "↑"})`)),
      el("th", { title: "on the Pareto front: no other trial is at least as good on every objective and better on one" }, "Pareto")]
      : el("th", {}, view.objective),
    el("th", {}, "steps trained"), el("th", {}, "job")));
  table.querySelector("tbody").replaceChildren(...view.trials.map((t) => el("tr", {
    "data-number": t.number, "data-state": t.state, "data-pareto": multi ? String(t.pareto) : undefined,
    class: runOf(view, t)?.degenerate ? "degenerate"
      : (t.number === view.best && !bestIsDegenerate(view)) || (multi && t.pareto) ? "best-row" : undefined,
    title: runOf(view, t)?.degenerate ? `at or below the majority-class baseline ${num(runOf(view, t).baseline)}` : undefined,
    "data-degenerate": runOf(view, t)?.degenerate ? "true" : undefined,
  },
  el("td", { class: "num" }, t.number), el("td", {}, badge(t.state)),
  names.map((n) => el("td", { class: "mono" }, value(t.params[n]))),
  multi ? [...view.objectives.map((_, i) => el("td", { class: "num" }, value(t.values ? t.values[i] : null))),
    el("td", { class: "pareto-mark" }, t.pareto ? "◆" : "")]
  // Optuna keeps a pruned trial's last intermediate value as its value: shown, but told apart.
  : t.state === "pruned" && t.value !== null
    ? el("td", { class: "num small", title: "its last intermediate value, when it was pruned" }, `${value(t.value)} (pruned)`)
    : el("td", { class: "num" }, value(t.value)),
  el("td", { class: "num" }, t.steps.toLocaleString("en-US")),
  el("td", {}, t.job_id ? el("a", { href: `/jobs/${t.job_id}` }, `job ${t.job_id}`) : "–",
    t.job_status ? [" ", badge(t.job_status)] : ""))));
  document.getElementById("study-empty").hidden = view.trials.length > 0;
}

function summary(view) {
  const s = view.study;
  const status = document.getElementById("study-status");
  status.textContent = s.status;
  status.className = `badge state-${s.status}`;
  const best = view.trials.find((t) => t.number === view.best);
  const front = view.trials.filter((t) => t.pareto);
  document.getElementById("study-summary").replaceChildren(
    ...Object.entries(s.counts).map(([state, n]) => [el("span", { class: `badge state-${state}` }, `${n} ${state}`), " "]).flat(),
    `· ${human(s.steps_total)} training steps in all · `,
    ...(view.objectives
      ? ["Pareto front: ", ...(front.length ? front.flatMap((t, i) => [i ? ", " : "",
        el("a", { class: "pareto-trial", href: `/jobs/${t.job_id}` }, `trial ${t.number}`)]) : ["none complete yet"])]
      : ["best: ", best ? el("a", { id: "study-best", href: `/jobs/${best.job_id}` }, `trial ${best.number}, ${value(best.value)} (job ${best.job_id})`)
        : "none complete yet"]));
  const warning = document.getElementById("study-warning");
  warning.textContent = view.objectives ? "" : degenerateWarning(view, view.best_run);
  warning.hidden = !warning.textContent;
}

function historyChart(view) {
  const h = view.history;
  Plotly.react("history-chart", [
    { type: "scatter", mode: "markers", name: "objective", x: h.map((p) => p.number), y: h.map((p) => p.value),
      marker: { color: "#1f77b4", size: 8 } },
    { type: "scatter", mode: "lines", name: "best so far", x: h.map((p) => p.number), y: h.map((p) => p.best),
      line: { color: "#d62728", shape: "hv" } },
  ], { ...LAYOUT, xaxis: { title: { text: "trial" } }, yaxis: { title: { text: view.objective } },
    legend: { orientation: "h", y: 1.12 } }, plotConfig(`study-${studyId}-history`));
}

// A multi-objective study: the first two objectives of every complete trial, the Pareto front joined.
function paretoChart(view) {
  const [x, y] = view.objectives;
  const done = view.trials.filter((t) => t.state === "complete" && t.values);
  const text = (t) => `trial ${t.number} (job ${t.job_id})<br>` +
    view.objectives.map((o, i) => `${o}: ${value(t.values[i])}`).join("<br>") + (t.pareto ? "<br>on the Pareto front" : "");
  const front = done.filter((t) => t.pareto).sort((a, b) => a.values[0] - b.values[0]);
  const rest = done.filter((t) => !t.pareto);
  Plotly.react("pareto-chart", [
    { type: "scatter", mode: "markers", name: "dominated", x: rest.map((t) => t.values[0]), y: rest.map((t) => t.values[1]),
      text: rest.map(text), hoverinfo: "text", marker: { color: "#7a869a", size: 8 } },
    { type: "scatter", mode: "lines+markers", name: "Pareto front", x: front.map((t) => t.values[0]),
      y: front.map((t) => t.values[1]), text: front.map(text), hoverinfo: "text",
      line: { color: "#cf222e", dash: "dot", shape: "hv" }, marker: { symbol: "diamond", color: "#cf222e", size: 11 } },
  ], { ...LAYOUT, height: 380, xaxis: { title: { text: x } }, yaxis: { title: { text: y } },
    legend: { orientation: "h", y: 1.1 } }, plotConfig(`study-${studyId}-pareto`));
}

function curvesChart(view) {
  const traces = view.trials.filter((t) => t.intermediate.length).map((t) => ({
    type: "scatter", mode: "lines+markers", name: `trial ${t.number} (${t.state})`, legendgroup: t.state,
    x: t.intermediate.map((p) => p.validation), y: t.intermediate.map((p) => p.value),
    line: { color: STATE_COLOUR[t.state] || "#7a869a", dash: t.state === "pruned" ? "dash" : "solid",
      width: t.number === view.best ? 3 : 1.5 },
    marker: { size: 5 },
  }));
  Plotly.react("curves-chart", traces, { ...LAYOUT, xaxis: { title: { text: "validation" }, dtick: 1 },
    yaxis: { title: { text: view.objective } }, showlegend: traces.length <= 20 },
  plotConfig(`study-${studyId}-intermediate`));
}

// A parameter's axis in the parallel coordinates: categories as their indices, log scales as log10.
function dimension(param, trials) {
  const raw = trials.map((t) => t.params[param.name]);
  if (param.kind === "categorical") {
    const labels = param.choices.map(String);
    return { label: param.name, values: raw.map((v) => labels.indexOf(String(v))), tickvals: labels.map((_, i) => i),
      ticktext: labels, range: [0, Math.max(labels.length - 1, 1)] };
  }
  if (param.log) {
    return { label: `log10 ${param.name}`, values: raw.map((v) => Math.log10(v)),
      range: [Math.log10(param.low), Math.log10(param.high)] };
  }
  return { label: param.name, values: raw, range: [param.low, param.high] };
}

function parametersCharts(view) {
  const done = view.trials.filter((t) => t.state === "complete" && firstValue(view, t) !== null);
  const values = done.map((t) => firstValue(view, t));
  const objective = firstObjective(view);
  const directions = view.directions || [view.direction];
  const scale = { colorscale: "Viridis", reversescale: directions[0] === "minimize" };
  Plotly.react("parcoords-chart", [{
    type: "parcoords",
    dimensions: [...view.params.map((p) => dimension(p, done)), { label: objective, values }],
    line: { color: values, ...scale, showscale: true },
  }], { height: 340, margin: { t: 50, r: 60, b: 30, l: 60 } }, plotConfig(`study-${studyId}-parallel`));

  const grid = document.getElementById("scatter-charts");
  // One chart per searched key, made once: later polls redraw them in place.
  if (grid.children.length !== view.params.length) {
    grid.replaceChildren(...view.params.map((p, i) => el("div", { class: "chart scatter-chart", id: `scatter-${i}`,
      "data-param": p.name })));
  }
  // Degenerate trials ringed in red; where a value repeats, its mean ± std; the majority-class
  // baseline as a labelled dotted line.
  const degenerate = done.map((t) => Boolean(runOf(view, t)?.degenerate));
  view.params.forEach((p, i) => {
    const xs = done.map((t) => t.params[p.name]);
    const traces = [{
      type: "scatter", mode: "markers", name: "trials", x: xs, y: values,
      text: done.map((t, j) => `trial ${t.number}${degenerate[j] ? " (at or below the baseline)" : ""}`),
      hovertemplate: "%{text}<br>%{x}: %{y}<extra></extra>",
      marker: { size: 8, color: done.map((t) => t.number), colorscale: "Viridis", showscale: i === view.params.length - 1,
        colorbar: { title: { text: "trial" } },
        line: { width: degenerate.map((d) => (d ? 2 : 0)), color: "#d62728" } },
    }];
    const perValue = (view.per_value?.[p.key ?? p.name] || []).filter((v) => v.mean !== null);
    if (!view.objectives && perValue.some((v) => v.n > 1)) {
      traces.push({ type: "scatter", mode: "lines+markers", name: "mean ± std", x: perValue.map((v) => v.value),
        y: perValue.map((v) => v.mean), error_y: { type: "data", array: perValue.map((v) => v.std ?? 0), visible: true },
        line: { color: "#ff7f0e" } });
    }
    if (!view.objectives && view.baseline != null && xs.length) {
      const ends = p.kind === "categorical" ? [p.choices[0], p.choices.at(-1)] : [Math.min(...xs), Math.max(...xs)];
      traces.push({ type: "scatter", mode: "lines", name: `majority-class baseline ${num(view.baseline)}`, x: ends,
        y: [view.baseline, view.baseline], line: { dash: "dot", color: "#7f7f7f" }, hoverinfo: "name" });
    }
    Plotly.react(`scatter-${i}`, traces, { ...LAYOUT, height: 280, title: { text: `${p.name} against the objective`, font: { size: 13 } },
      margin: { t: 35, r: 10, b: 45, l: 60 }, showlegend: traces.length > 1, legend: { orientation: "h", y: -0.35 },
      xaxis: { title: { text: p.log ? `${p.name} (log scale)` : p.name }, type: p.kind === "categorical" ? "category" : p.log ? "log" : "linear" },
      yaxis: { title: { text: objective } } }, plotConfig(`study-${studyId}-${p.name}`));
  });
}

function importancesChart(view) {
  const chart = document.getElementById("importance-chart");
  const note = document.getElementById("importance-note");
  const entries = Object.entries(view.importances || {}).sort((a, b) => a[1] - b[1]);
  note.textContent = view.importances_note || (entries.length ? "Optuna's parameter importances over the complete trials." : "");
  chart.hidden = !entries.length;
  if (!entries.length) return;
  Plotly.react("importance-chart", [{
    type: "bar", orientation: "h", x: entries.map((e) => e[1]), y: entries.map((e) => e[0]),
    text: entries.map((e) => e[1].toFixed(3)), textposition: "auto", marker: { color: "#2456c9" },
  }], { height: Math.max(160, 60 + 34 * entries.length), margin: { t: 10, r: 20, b: 40, l: 200 },
    xaxis: { title: { text: "importance" }, range: [0, 1] } }, plotConfig(`study-${studyId}-importances`));
}

// The per-value tables each poll; the top runs' curves only when the top runs change.
let drawnTop = null;
async function analysis(view) {
  perValueTables(document.getElementById("per-value"), { ...view, params: view.params.map((p) => ({ ...p, key: p.key ?? p.name })) });
  const top = view.top_job_ids.join(",");
  if (top === drawnTop) return;
  drawnTop = top;
  await topCurves(document.getElementById("top-curves"), view, `study-${studyId}-top`);
}

async function load() {
  const view = await api(`/api/v1/views/studies/${encodeURIComponent(studyId)}`);
  summary(view);
  trialsTable(view);
  if (view.objectives) {
    paretoChart(view);
  } else {
    historyChart(view);
    curvesChart(view);
  }
  parametersCharts(view);
  importancesChart(view);
  if (!view.objectives) await analysis(view);
  document.getElementById("study").dataset.loaded = "true";
  return view.study.status === "running";
}

load().then((running) => {
  if (running) poll(load, 5000);
}).catch((err) => flash(`study: ${err.message}`));
