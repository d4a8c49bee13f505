// A sweep's analysis under its jobs table: the score per swept value (mean ± std over the jobs with
// that value), a parallel-coordinates plot (swept keys → score), the score against each key (log
// axis where the values span two decades) and the top runs' validation curves overlaid. Degenerate
// runs (at or below their task's majority-class baseline) are marked, and so is a "best" among them.
import { PALETTE, api, el, flash, plotConfig } from "/static/js/api.js";
import { CurveCharts } from "/static/js/curves.js";

const root = document.getElementById("sweep-analysis");

function num(v, digits = 4) {
  return v === null || v === undefined ? "–" : Number(Number(v).toPrecision(digits)).toString();
}

function perValueTables(view) {
  const box = document.getElementById("per-value");
  if (!view.params.length) {
    box.replaceChildren(el("p", { class: "empty" }, "The sweep varies only the seed."));
    return;
  }
  box.replaceChildren(...view.params.map((p) => el("table", { class: "grid small per-value", "data-key": p.key },
    el("thead", {}, el("tr", {}, [p.key, `mean ± std${view.metric ? ` (${view.metric})` : ""}`, "n", "min", "max", ""]
      .map((h) => el("th", { class: h === p.key ? "mono" : "" }, h)))),
    el("tbody", {}, view.per_value[p.key].map((v) => el("tr", { "data-value": v.value, "data-mean": v.mean ?? "", "data-n": v.n },
      el("td", { class: "mono" }, String(v.value)),
      el("td", { class: "num" }, v.mean === null ? "–" : v.std === null ? num(v.mean) : `${num(v.mean)} ± ${num(v.std)}`),
      el("td", { class: "num" }, String(v.n)), el("td", { class: "num" }, num(v.min)), el("td", { class: "num" }, num(v.max)),
      el("td", { class: "small" }, v.degenerate ? el("span", { class: "flagged" }, `${v.degenerate} at baseline`) : "")))))));
}

// Plotly's parcoords takes numbers: a text-valued key is drawn on an axis of its values' positions.
function dimension(view, p) {
  const values = view.runs.filter((r) => r.score !== null).map((r) => r.params[p.key]);
  const numeric = values.every((v) => typeof v === "number");
  if (numeric) {
    return p.log_scale
      ? { label: `log10 ${p.key}`, values: values.map((v) => Math.log10(v)) }
      : { label: p.key, values };
  }
  const ticks = [...new Set(values.map(String))];
  return { label: p.key, values: values.map((v) => ticks.indexOf(String(v))), tickvals: ticks.map((_, i) => i), ticktext: ticks };
}

function parallel(view) {
  const scored = view.runs.filter((r) => r.score !== null);
  const box = document.getElementById("parcoords");
  if (!scored.length || !view.params.length) {
    box.replaceChildren(el("p", { class: "empty" }, "No scored run with swept keys yet."));
    return;
  }
  const scores = scored.map((r) => r.score);
  Plotly.react(box, [{
    type: "parcoords",
    line: { color: scores, colorscale: "Viridis", showscale: true, colorbar: { title: { text: view.metric || "score" } } },
    dimensions: [...view.params.map((p) => dimension(view, p)), { label: view.metric || "score", values: scores }],
  }], { height: 360, margin: { l: 60, r: 60, t: 50, b: 30 } }, plotConfig(`sweep-${root.dataset.sweep}-parcoords`));
}

function scoreAgainst(view) {
  const box = document.getElementById("score-vs");
  box.replaceChildren();
  for (const p of view.params) {
    const div = el("div", { class: "chart small-chart", "data-key": p.key });
    box.append(div);
    const runs = view.runs.filter((r) => r.score !== null);
    const traces = [{
      type: "scatter", mode: "markers", name: "runs", x: runs.map((r) => r.params[p.key]), y: runs.map((r) => r.score),
      text: runs.map((r) => r.label), marker: { color: runs.map((r) => (r.degenerate ? "#d62728" : PALETTE[0])), size: 8 },
    }, {
      type: "scatter", mode: "lines+markers", name: "mean over seeds",
      x: view.per_value[p.key].map((v) => v.value), y: view.per_value[p.key].map((v) => v.mean),
      error_y: { type: "data", array: view.per_value[p.key].map((v) => v.std ?? 0), visible: true }, line: { color: PALETTE[1] },
    }];
    if (view.baseline !== null) {
      traces.push({ type: "scatter", mode: "lines", name: `majority-class baseline ${num(view.baseline)}`,
        x: [view.per_value[p.key][0].value, view.per_value[p.key].at(-1).value], y: [view.baseline, view.baseline],
        line: { dash: "dot", color: "#7f7f7f" } });
    }
    Plotly.react(div, traces, {
      height: 300, margin: { l: 60, r: 10, t: 30, b: 50 }, title: { text: `${view.metric || "score"} against ${p.key}`, font: { size: 13 } },
      xaxis: { title: { text: p.key }, type: p.log_scale ? "log" : "-" }, yaxis: { title: { text: view.metric || "score" } },
      legend: { orientation: "h" },
    }, plotConfig(`sweep-${root.dataset.sweep}-${p.key}`));
  }
}

async function topCurves(view) {
  const box = document.getElementById("top-curves");
  if (!view.top_job_ids.length) {
    box.replaceChildren(el("p", { class: "empty" }, "No finished run yet."));
    return;
  }
  let curves;
  try {
    curves = await api(`/api/v1/views/curves?jobs=${view.top_job_ids.join(",")}`);
  } catch (err) {
    box.replaceChildren(el("p", { class: "error" }, `curves: ${err.message}`));
    return;
  }
  const series = view.top_job_ids.map((jobId, i) => {
    const run = view.runs.find((r) => r.job_id === jobId);
    const byStep = new Map();
    for (const [key, perRun] of Object.entries(curves.curves)) {
      if (!key.startsWith("val")) continue;
      const c = perRun.find((x) => x.job_id === jobId);
      if (!c) continue;
      c.steps.forEach((step, j) => {
        if (!byStep.has(step)) byStep.set(step, { step });
        byStep.get(step)[key] = c.values[j];
      });
    }
    return { label: run ? run.label : `#${jobId}`, colour: PALETTE[i % PALETTE.length], points: [...byStep.values()].sort((a, b) => a.step - b.step) };
  });
  if (!series.some((s) => s.points.length)) {
    box.replaceChildren(el("p", { class: "empty" }, "The top runs logged no validation curves."));
    return;
  }
  new CurveCharts(box, { filename: `sweep-${root.dataset.sweep}-top` }).draw(series);
}

function markDegenerate(view) {
  for (const run of view.runs.filter((r) => r.degenerate)) {
    const row = document.querySelector(`#sweep-jobs tr[data-job="${run.job_id}"]`);
    if (row) {
      row.classList.add("degenerate");
      row.title = `at or below the majority-class baseline ${num(run.baseline)}`;
    }
  }
  const warning = document.getElementById("sweep-warning");
  if (view.best && view.best.degenerate) {
    document.querySelector("#sweep-jobs tr.best-row")?.classList.remove("best-row");
    warning.hidden = false;
    warning.textContent = view.all_degenerate
      ? `⚠ every run is at or below the majority-class baseline (${num(view.baseline)}): nothing was learnt`
      : `⚠ the best run is at or below its majority-class baseline (${num(view.best.baseline)})`;
  }
}

async function load() {
  let view;
  try {
    view = await api(`/api/v1/views/sweeps/${encodeURIComponent(root.dataset.sweep)}`);
  } catch (err) {
    flash(`sweep: ${err.message}`);
    return;
  }
  markDegenerate(view);
  perValueTables(view);
  parallel(view);
  scoreAgainst(view);
  await topCurves(view);
}

load();
