// The parts a sweep's page and a study's page share (their views' `params`, `runs`, `per_value`,
// `baseline`, `top_job_ids`; ptmlab.views.sweep param_view): per searched value the mean ± std of
// the score, the score against each key, the top runs' validation curves overlaid, and the warning a
// degenerate "best" carries. A run at or below its task's majority-class baseline is degenerate.
import { PALETTE, api, el, fmtScore, plotConfig } from "/static/js/api.js";
import { CurveCharts } from "/static/js/curves.js";

const MEMBERS_SHOWN = 12;  // a value's runs linked in its row; the rest counted

export function num(v, digits = 4) {
  return v === null || v === undefined ? "–" : Number(Number(v).toPrecision(digits)).toString();
}

// A key whose every run drew its own value (a study's continuous parameter) has no per-value mean:
// its chart shows it instead.
function repeated(view, key) {
  return view.per_value[key].some((v) => v.n > 1);
}

function spreadText(v) {
  if (v.n < 2) return "";
  return v.spread === "runs" ? `over runs (${v.varying.join(", ")} differ)` : "over seeds";
}

// One table per searched key: its values, mean ± std of the score (over seeds where the runs of a
// value differ only in their seed, else over runs with the keys that differ named), n, min, max and
// how many of its runs are degenerate.
export function perValueTables(box, view) {
  if (!view.params.length) {
    box.replaceChildren(el("p", { class: "empty" }, "Only the seed varies."));
    return;
  }
  const metric = view.metric ? ` (${view.metric})` : "";
  box.replaceChildren(...view.params.map((p) => {
    if (!repeated(view, p.key)) {
      return el("p", { class: "small per-value-none", "data-key": p.key },
        el("span", { class: "mono" }, p.key), `: every run drew its own value (${view.per_value[p.key].length} values); `,
        "its chart below shows the score against it.");
    }
    return el("table", { class: "grid small per-value", "data-key": p.key },
      el("thead", {}, el("tr", {}, [p.key, `mean ± std${metric}`, "n", "spread", "min", "max", "runs", ""]
        .map((h) => el("th", { class: h === p.key ? "mono" : "" }, h)))),
      el("tbody", {}, view.per_value[p.key].map((v) => el("tr", {
        "data-value": v.value, "data-mean": v.mean ?? "", "data-std": v.std ?? "", "data-n": v.n,
        class: v.degenerate && v.degenerate === v.n ? "degenerate" : undefined,
      },
      el("td", { class: "mono" }, String(v.value)),
      el("td", { class: "num" }, v.mean === null ? "–" : v.std === null ? fmtScore(v.mean) : `${fmtScore(v.mean)} ± ${fmtScore(v.std)}`),
      el("td", { class: "num" }, String(v.n)), el("td", { class: "small" }, spreadText(v)),
      el("td", { class: "num" }, fmtScore(v.min)), el("td", { class: "num" }, fmtScore(v.max)),
      el("td", { class: "small" }, v.job_ids.slice(0, MEMBERS_SHOWN).flatMap((id) => [el("a", { href: `/jobs/${id}` }, `#${id}`), " "]),
        v.job_ids.length > MEMBERS_SHOWN ? `+${v.job_ids.length - MEMBERS_SHOWN} more` : ""),
      el("td", { class: "small" }, v.degenerate ? el("span", { class: "flagged",
        title: "at or below the task's majority-class baseline" },
      `⚠ ${v.degenerate} of ${v.n} at or below the baseline ${num(v.baseline)}`) : "")))));
  }));
}

// The score of every scored run against each key (degenerate runs in red), the per-value mean ±
// std joined where values repeat, and the majority-class baseline as a labelled dotted line; a log
// x-axis for a log-scale key.
export function scoreAgainst(box, view, filename) {
  box.replaceChildren();
  const metric = view.metric || "score";
  const runs = view.runs.filter((r) => r.score !== null);
  for (const p of view.params) {
    const div = el("div", { class: "chart small-chart", "data-key": p.key });
    box.append(div);
    const xs = runs.map((r) => r.params[p.key]);
    const traces = [{
      type: "scatter", mode: "markers", name: "runs", x: xs, y: runs.map((r) => r.score),
      text: runs.map((r) => (r.degenerate ? `${r.label} (at or below the baseline)` : r.label)),
      hovertemplate: `%{text}<br>${p.key} %{x}<br>${metric} %{y}<extra></extra>`,
      marker: { color: runs.map((r) => (r.degenerate ? "#d62728" : PALETTE[0])), size: 8 },
    }];
    const values = view.per_value[p.key].filter((v) => v.mean !== null);
    if (repeated(view, p.key)) {
      traces.push({
        type: "scatter", mode: "lines+markers", name: "mean ± std", x: values.map((v) => v.value), y: values.map((v) => v.mean),
        error_y: { type: "data", array: values.map((v) => v.std ?? 0), visible: true }, line: { color: PALETTE[3] },
      });
    }
    const numeric = xs.filter((x) => typeof x === "number");
    if (view.baseline !== null && view.baseline !== undefined && xs.length) {
      const ends = numeric.length === xs.length ? [Math.min(...numeric), Math.max(...numeric)] : [xs[0], xs.at(-1)];
      traces.push({ type: "scatter", mode: "lines", name: `majority-class baseline ${num(view.baseline)}`, x: ends,
        y: [view.baseline, view.baseline], line: { dash: "dot", color: "#7f7f7f" }, hoverinfo: "name" });
    }
    Plotly.react(div, traces, {
      height: 300, margin: { l: 60, r: 10, t: 30, b: 50 }, title: { text: `${metric} against ${p.key}`, font: { size: 13 } },
      xaxis: { title: { text: p.log_scale ? `${p.key} (log scale)` : p.key }, type: p.log_scale ? "log" : numeric.length === xs.length ? "linear" : "category" },
      yaxis: { title: { text: metric } }, legend: { orientation: "h", y: -0.3 },
    }, plotConfig(`${filename}-${p.key.replace(/\W+/g, "_")}`));
  }
}

// The validation curves (MLflow history, `val…` keys) of the best runs, one colour per run. Only
// runs that stored a result have a history to fetch.
export async function topCurves(box, view, filename) {
  const withResult = new Set(view.runs.filter((r) => r.metric).map((r) => r.job_id));
  const top = view.top_job_ids.filter((id) => withResult.has(id));
  if (!top.length) {
    box.replaceChildren(el("p", { class: "empty" }, "No finished run with a stored result yet."));
    return;
  }
  let curves;
  try {
    curves = await api(`/api/v1/views/curves?jobs=${top.join(",")}`);
  } catch (err) {
    box.replaceChildren(el("p", { class: "error" }, `curves: ${err.message}`));
    return;
  }
  const series = top.map((jobId, i) => {
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
    const score = run && run.score !== null ? ` · ${num(run.score)}` : "";
    return { label: `${run ? run.label : `#${jobId}`}${score}`, colour: PALETTE[i % PALETTE.length],
      points: [...byStep.values()].sort((a, b) => a.step - b.step) };
  });
  if (!series.some((s) => s.points.length)) {
    box.replaceChildren(el("p", { class: "empty" }, `The top ${top.length} run(s) logged no validation curves.`));
    return;
  }
  new CurveCharts(box, { filename }).draw(series);
}

// The words a degenerate best carries instead of a success mark; "" when the best is not degenerate.
export function degenerateWarning(view, best) {
  if (!best || !best.degenerate) return "";
  return view.all_degenerate
    ? `⚠ every run is at or below the majority-class baseline (${num(view.baseline)}): nothing was learnt`
    : `⚠ the best run is at or below its majority-class baseline (${num(best.baseline)})`;
}
