// A sweep's analysis under its jobs table: the score per swept value (mean ± std over the jobs with
// that value), a parallel-coordinates plot (swept keys → score), the score against each key (log
// axis where the values span two decades) and the top runs' validation curves overlaid. Degenerate
// runs (at or below their task's majority-class baseline) are marked, and so is a "best" among them.
import { api, el, flash, plotConfig } from "/static/js/api.js";
import { degenerateWarning, num, perValueTables, scoreAgainst, topCurves } from "/static/js/params_view.js";

const root = document.getElementById("sweep-analysis");

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

function markDegenerate(view) {
  for (const run of view.runs.filter((r) => r.degenerate)) {
    const row = document.querySelector(`#sweep-jobs tr[data-job="${run.job_id}"]`);
    if (row) {
      row.classList.add("degenerate");
      row.title = `at or below the majority-class baseline ${num(run.baseline)}`;
    }
  }
  const warning = degenerateWarning(view, view.best);
  if (warning) {
    document.querySelector("#sweep-jobs tr.best-row")?.classList.remove("best-row");
    const box = document.getElementById("sweep-warning");
    box.hidden = false;
    box.textContent = warning;
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
  perValueTables(document.getElementById("per-value"), view);
  parallel(view);
  scoreAgainst(document.getElementById("score-vs"), view, `sweep-${root.dataset.sweep}`);
  await topCurves(document.getElementById("top-curves"), view, `sweep-${root.dataset.sweep}-top`);
}

load();
