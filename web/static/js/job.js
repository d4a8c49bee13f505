// One job: status, actions, pipeline neighbours, attempts, a log tail that follows while it runs.
import { PALETTE, api, badge, duration, el, flash, fmtBytes, fmtParams, fmtScore, plotConfig, plotlyReady, poll, progressBar, seconds, shortTime }
  from "/static/js/api.js";
import { CurveCharts, X_AXES } from "/static/js/curves.js";

const jobId = Number(document.getElementById("job").dataset.jobId);
const X_KEYS = new Set(X_AXES.map((a) => a.key));
const TERMINAL = ["succeeded", "failed", "cancelled"];
const LOG_TAIL = 200;
const MAX_LOG_CHARS = 400_000;
let logOffset = null;
let logAttempt = null;
let detailStatus = null;  // the job status the detail was fetched for
let progressSeen = null;  // updated_at and status of the progress last drawn
let charts = null;  // the job's CurveCharts, made when it first has a curve

function toYaml(value, indent = "") {
  if (value === null || value === undefined) return "null";
  if (Array.isArray(value)) {
    if (!value.length) return "[]";
    if (value.every((v) => typeof v !== "object" || v === null)) return `[${value.map((v) => JSON.stringify(v)).join(", ")}]`;
    return value.map((v) => `\n${indent}- ${toYaml(v, `${indent}  `).trimStart()}`).join("");
  }
  if (typeof value === "object") {
    const keys = Object.keys(value);
    if (!keys.length) return "{}";
    return keys.map((k) => {
      const v = value[k];
      const nested = v && typeof v === "object" && !(Array.isArray(v) && v.every((x) => typeof x !== "object"));
      return `\n${indent}${k}:${nested ? toYaml(v, `${indent}  `) : ` ${toYaml(v, indent)}`}`;
    }).join("");
  }
  return typeof value === "string" ? (/^[\w./:@+-]*$/.test(value) && value !== "" ? value : JSON.stringify(value)) : String(value);
}

function jobLink(j) {
  return el("li", {}, el("a", { href: `/jobs/${j.id}` }, `job ${j.id}`), j.name ? ` ${j.name} ` : " ", `(${j.stage}) `, badge(j.status));
}

function showJob(job) {
  const status = document.getElementById("job-status");
  status.textContent = job.status;
  status.className = `badge state-${job.status}`;
  document.getElementById("job-meta").replaceChildren(
    `queue ${job.queue} · priority ${job.priority} · ${job.gpus ? `${job.gpus} GPU` : "CPU"} · attempts ${job.attempts}/${job.max_attempts}`,
    job.worker_id ? ` · worker ${job.worker_id}` : "",
    job.started_at ? ` · ran ${duration(job.started_at, job.finished_at)}` : ` · queued ${shortTime(job.created_at)} UTC`,
    job.sweep_id ? " · sweep " : "", job.sweep_id ? el("a", { href: `/jobs?sweep_id=${job.sweep_id}` }, job.sweep_id) : "",
  );
  const cancel = document.getElementById("cancel-button");
  cancel.hidden = TERMINAL.includes(job.status);
  cancel.disabled = job.cancel_requested;
  cancel.textContent = job.cancel_requested ? "Cancelling…" : "Cancel";
  document.getElementById("retry-button").hidden = !(job.status === "failed" || job.status === "cancelled");
  const error = document.getElementById("job-error");
  error.hidden = !job.error;
  // The error once, as the worker recorded it: it already says "exit code N" when that is all there is.
  const prefix = job.exit_code != null && !/^exit code /.test(job.error || "") ? `exit code ${job.exit_code}: ` : "";
  error.textContent = job.error ? `${prefix}${job.error}` : "";
}

function fmt(value, digits = 0) {
  return value == null ? "–" : Number(value).toLocaleString("en", { maximumFractionDigits: digits });
}

function percent(value) {
  return value == null ? "–" : `${(100 * value).toFixed(1)} %`;
}

// How fast the run trained (summary.json `throughput`): job-wide tokens/s and samples/s, MFU per device.
function speedTable(t) {
  const peak = t.peak_flops ? `of ${fmt(t.peak_flops / 1e12, 1)} TFLOP/s peak` : "no peak FLOP/s known: set trainer.peak_flops";
  const rows = [
    ["tokens/s", fmt(t.tokens_per_s), "non-padding tokens, all devices"],
    ["samples/s", fmt(t.samples_per_s, 1), ""],
    ["MFU", percent(t.mfu), peak],
    ["data wait", percent(t.data_wait_fraction), "wall time between steps"],
    ["padding", percent(t.padding_fraction), "of the batch slots"],
    ["devices", `${t.world_size} × ${t.device ?? "?"}`, `${t.timed_steps} timed steps`],
  ];
  return el("table", { class: "grid small throughput" }, el("tbody", {}, rows.map(([name, value, note]) =>
    el("tr", { "data-metric": name }, el("th", {}, name), el("td", { class: "num" }, value), el("td", { class: "small" }, note)))));
}

function showDetail(detail) {
  const link = document.getElementById("mlflow-link");
  if (detail.mlflow_url) { link.href = detail.mlflow_url; link.hidden = false; }
  const graph = document.getElementById("job-graph");
  if (detail.parents.length || detail.children.length) {
    graph.replaceChildren(
      el("p", {}, detail.job.pipeline_id ? `pipeline ${detail.job.pipeline_id}: ` : "",
        detail.job.pipeline_id ? el("a", { href: `/pipelines/${detail.job.pipeline_id}`, id: "pipeline-link" }, "its graph") : "",
        detail.job.pipeline_id ? " · " : "",
        detail.job.pipeline_id ? el("a", { href: `/jobs?pipeline_id=${detail.job.pipeline_id}` }, "all its jobs") : ""),
      el("div", { class: "small" }, "parents"), el("ul", { id: "parents" }, detail.parents.map(jobLink)),
      el("div", { class: "small" }, "children"), el("ul", { id: "children" }, detail.children.map(jobLink)),
    );
  } else {
    graph.replaceChildren(el("p", { class: "empty" }, detail.job.pipeline_id
      ? `pipeline ${detail.job.pipeline_id}: no parents or children.` : "No parents or children."));
  }
  if (detail.results.length) {
    document.getElementById("job-results").replaceChildren(...detail.results.map((r) =>
      el("div", { class: "job-result", "data-result": r.id },
        el("p", {}, `${r.kind} result`),
        digestTable(r.digest), recipeSection(r.digest), r.digest?.confusion ? confusionSection(r.id, r.digest.confusion) : "",
        ...otherTaskConfusions(r).map(([id, c, task]) => confusionSection(id, c, task)),
        ...(r.digest?.probes || []).map((p, i) => probeCurve(r.id, p, i)),
        r.throughput ? speedTable(r.throughput) : "")));
    for (const r of detail.results) (r.digest?.probes || []).forEach((p, i) => drawProbeCurve(r.id, p, i));
    for (const r of detail.results) if (r.digest?.confusion) drawConfusion(r.id, r.digest.confusion);
    for (const r of detail.results) for (const [id, c] of otherTaskConfusions(r)) drawConfusion(id, c);
    if (detail.results.some((r) => r.kind === "attack")) showAttackRecords().catch((err) => flash(`attacked examples: ${err.message}`));
    const sampled = detail.results.find((r) => PREDICTION_KINDS.includes(r.digest?.task_kind));
    if (sampled) showPredictions({}).catch((err) => flash(`predictions: ${err.message}`));
  }
  document.getElementById("config-source").textContent = detail.config_source ? `(${detail.config_source})` : "";
  document.getElementById("config").textContent = detail.config ? toYaml(detail.config).trimStart() : "–";
}

// A classification fine-tune's evaluation split: the confusion matrix (rows gold, columns
// predicted), each class's precision / recall / F1 / support, and the most confident mistakes.
// A multi-task run's confusion matrices beyond its first task's (which is the run's own, above).
function otherTaskConfusions(r) {
  return (r.digest?.task_confusions || []).slice(1).map((t) => [`${r.id}-${t.task.replace(/[^A-Za-z0-9_-]/g, "_")}`, t.confusion, t.task]);
}

function confusionSection(id, c, task = null) {
  const pct = (v) => `${(100 * v).toFixed(1)}`;
  return el("section", { class: "confusion", "data-result": id },
    el("h3", {}, `Confusion matrix${task ? ` of ${task}` : ""} (${c.errors} of ${c.examples} wrong)`),
    el("div", { id: `confusion-${id}`, class: "chart confusion-chart" }),
    el("table", { class: "grid small per-class" },
      el("thead", {}, el("tr", {}, ["class", "precision %", "recall %", "F1 %", "support"].map((h) => el("th", {}, h)))),
      el("tbody", {}, c.per_class.map((k) => el("tr", { "data-label": k.label }, el("td", {}, k.label),
        el("td", { class: "num" }, pct(k.precision)), el("td", { class: "num" }, pct(k.recall)),
        el("td", { class: "num" }, pct(k.f1)), el("td", { class: "num" }, String(k.support)))))),
    c.misclassified.length ? el("details", { class: "misclassified" }, el("summary", {}, `${c.misclassified.length} most confident mistakes`),
      el("table", { class: "grid small" }, el("thead", {}, el("tr", {}, ["text", "gold", "predicted", "probability"].map((h) => el("th", {}, h)))),
        el("tbody", {}, c.misclassified.map((m) => el("tr", {}, el("td", {}, m.text), el("td", {}, m.gold),
          el("td", {}, m.predicted), el("td", { class: "num" }, m.score.toFixed(3))))))) : "");
}

function drawConfusion(id, c) {
  Plotly.react(`confusion-${id}`, [{
    type: "heatmap", z: c.matrix, x: c.labels, y: c.labels, colorscale: "Blues", hoverongaps: false,
    text: c.matrix.map((row) => row.map(String)), texttemplate: "%{text}", colorbar: { title: { text: "examples" } },
  }], { height: 120 + 40 * c.labels.length, width: 200 + 60 * c.labels.length, margin: { l: 80, r: 20, t: 10, b: 60 },
    xaxis: { title: { text: "predicted" } }, yaxis: { title: { text: "gold" }, autorange: "reversed" } }, plotConfig(`confusion-${id}`));
}

// The recipe a fine-tune trained with (conf/recipe/) and where each value came from, and the warnings
// on unusual hyper-parameters (fewer than 100 steps, a fine-tuning rate from scratch ...).
function recipeSection(digest) {
  const recipe = digest?.recipe;
  const warnings = digest?.warnings || [];
  if (!recipe && !warnings.length) return "";
  return el("div", { class: "recipe small" },
    warnings.map((w) => el("p", { class: "warning recipe-warning" }, `⚠ ${w}`)),
    recipe ? el("p", {}, el("b", {}, "recipe "), el("span", { class: "recipe-name" }, recipe.name),
      Object.keys(recipe.values || {}).length ? ": " : " (the stage's defaults)",
      ...Object.entries(recipe.values || {}).map(([key, v], i) => el("span", { class: "recipe-value", "data-key": key },
        i ? " · " : "", el("code", {}, `${key}=${JSON.stringify(v.value)}`), ` (${v.origin})`))) : "");
}

// A result in its stage's terms (ptmlab.views.job_results): name, value, what it is measured against.
function digestTable(digest) {
  if (!digest?.rows?.length) return "";
  return el("table", { class: "grid small result-digest" }, el("tbody", {}, digest.rows.map((row) =>
    el("tr", { "data-name": row.name }, el("th", {}, row.name.replace(/ \(bytes\)$/, "")),
      el("td", { class: "num" }, typeof row.value === "number" ? digestValue(row.name, row.value) : row.value),
      el("td", { class: "small" }, row.note || "")))));
}

// Sizes in MiB, parameter counts in k/M, counts whole, fractions (scores, rates) with four decimals
// so a column lines up; other figures (BLEU, queries, milliseconds) with four significant digits.
function digestValue(name, value) {
  if (/bytes/.test(name)) return fmtBytes(value);
  if (/parameters|params/.test(name)) return fmtParams(value);
  if (Number.isInteger(value)) return value.toLocaleString("en");
  if (Math.abs(value) >= 1000) return value.toLocaleString("en", { maximumFractionDigits: 1 });
  return Math.abs(value) > 1 ? value.toPrecision(4) : fmtScore(value);
}

// A probe task's score per layer, with the random-init twin and the control task when run, the
// selectivity (score − control) on an axis of its own, and its flat baselines as labelled lines;
// the table under it carries the same numbers for reading off.
const SCORE_UNITS = { accuracy: "accuracy (0–1)", uuas: "UUAS (0–1)", spearman: "Spearman ρ (−1–1)" };

function selectivity(probe) {
  return probe.control ? probe.scores.map((v, j) => (v == null || probe.control[j] == null ? null : v - probe.control[j])) : null;
}

function probeCurve(resultId, probe, i) {
  const cell = (v) => el("td", { class: "num" }, fmtScore(v));
  const selective = selectivity(probe);
  const table = el("table", { class: "grid small probe-layers" },
    el("thead", {}, el("tr", {}, el("th", {}, "layer"), el("th", {}, probe.metric),
      probe.control ? el("th", {}, "control task") : "", selective ? el("th", {}, "selectivity") : "",
      probe.random_init ? el("th", {}, "random init") : "")),
    el("tbody", {}, probe.layers.map((layer, j) => el("tr", { class: layer === probe.best_layer ? "best-row" : "" },
      el("td", {}, layer), cell(probe.scores[j]), probe.control ? cell(probe.control[j]) : "",
      selective ? cell(selective[j]) : "", probe.random_init ? cell(probe.random_init[j]) : ""))));
  const baselines = Object.entries(probe.baselines || {}).map(([k, v]) => `${k.replaceAll("_", " ")} ${fmtScore(v)}`).join(" · ");
  const depth = el("label", { class: "small check" }, el("input", { type: "checkbox", class: "relative-depth",
    onchange: (e) => drawProbeCurve(resultId, probe, i, e.target.checked) }), " relative depth (layer ÷ number of layers)");
  return el("div", { class: "probe-curve" }, el("h3", {}, `${probe.probe_task} · ${probe.metric} per layer`), depth,
    el("div", { id: `probe-chart-${resultId}-${i}`, class: "probe-chart" }),
    baselines ? el("p", { class: "small" }, `baselines: ${baselines}`) : "", table);
}

function drawProbeCurve(resultId, probe, i, relative = false) {
  if (typeof Plotly === "undefined") return;
  const depth = Math.max(1, ...probe.layers);  // layer 0 is the embeddings: the last layer is depth 1
  const xs = probe.layers.map((l) => (relative ? l / depth : l));
  const line = (name, y, dash, extra = {}) => ({ type: "scatter", name, x: xs, y, mode: "lines+markers", line: { dash }, ...extra });
  const traces = [line(probe.metric, probe.scores, "solid")];
  if (probe.control) traces.push(line("control task", probe.control, "dot"));
  if (probe.random_init) traces.push(line("random init", probe.random_init, "dash"));
  const selective = selectivity(probe);
  if (selective) traces.push(line("selectivity (right axis)", selective, "solid", { yaxis: "y2", line: { color: "#8c564b", width: 1.5 } }));
  // A baseline is one value: a flat, named line across the layers, selectivities on their own axis.
  const span = [Math.min(...xs), Math.max(...xs)];
  for (const [key, value] of Object.entries(probe.baselines || {})) {
    const onSelectivity = key.includes("selectivity");
    traces.push({ type: "scatter", mode: "lines", x: span, y: [value, value], name: `baseline: ${key.replaceAll("_", " ")} ${fmtScore(value, 3)}`,
      line: { dash: "dot", width: 1, color: onSelectivity ? "#c49c94" : "#999" }, yaxis: onSelectivity ? "y2" : "y", hoverinfo: "name" });
  }
  Plotly.react(`probe-chart-${resultId}-${i}`, traces, { height: 300, margin: { t: 10, r: 60, b: 40, l: 60 },
    xaxis: { title: { text: relative ? "relative depth (layer ÷ number of layers)" : "layer (0 = embeddings)" },
      ...(relative ? { range: [-0.02, 1.02] } : { dtick: 1 }) },
    yaxis: { title: { text: SCORE_UNITS[probe.metric] ?? probe.metric } },
    ...(selective || Object.keys(probe.baselines || {}).some((k) => k.includes("selectivity"))
      ? { yaxis2: { title: { text: "selectivity (score − control)" }, overlaying: "y", side: "right", zeroline: true, showgrid: false } } : {}),
    legend: { orientation: "h", y: -0.25 } },
  plotConfig(`job-${jobId}-probe-${probe.probe_task}`));
}

// An attack job's examples (GET /api/v1/jobs/<id>/attack-records, read from its records artifact):
// the first successful attacks and a few failed ones, original and perturbed side by side, each word a
// text node and the changed ones (the server's word diff) in <mark>.
const SHOWN = { succeeded: 20, failed: 5 };

async function showAttackRecords() {
  const [succeeded, failed] = await Promise.all(Object.entries(SHOWN).map(([status, limit]) =>
    api(`/api/v1/jobs/${jobId}/attack-records?status=${status}&limit=${limit}`)));
  const { counts, class_labels: names } = succeeded;
  const label = (i) => (i == null ? "–" : names?.[i] ?? String(i));
  const words = (marked) => marked.flatMap((w, i) => [i ? " " : "", w.changed ? el("mark", { class: "changed" }, w.word) : w.word]);
  const row = (r) => el("tr", { "data-status": r.status, "data-row": r.index },
    el("td", {}, r.index), el("td", {}, badge(r.status)), el("td", {}, label(r.label)),
    el("td", {}, `${label(r.prediction_before)} → ${label(r.prediction_after)}`), el("td", { class: "num" }, r.queries),
    el("td", { class: "text original" }, r.context ? el("div", { class: "context small" }, r.context) : "", words(r.original)),
    el("td", { class: "text perturbed" }, words(r.perturbed || [])));
  document.getElementById("attack-records-counts").textContent =
    `${counts.succeeded} succeeded · ${counts.failed} failed · ${counts.skipped} skipped (misclassified before the attack)`;
  const shown = [...succeeded.records, ...failed.records];
  document.getElementById("attack-records-body").replaceChildren(
    el("p", { class: "small" }, `the first ${succeeded.records.length} of ${counts.succeeded} successful attacks and `,
      `${failed.records.length} of ${counts.failed} failed ones, in sample order; changed words marked`),
    shown.length ? el("table", { class: "grid small attack-records" },
      el("thead", {}, el("tr", {}, ["row", "status", "gold", "prediction", "queries", "original", "perturbed"].map((h) => el("th", {}, h)))),
      el("tbody", {}, shown.map(row))) : el("p", { class: "empty" }, "no example was attacked"));
  document.getElementById("attack-records").hidden = false;
}

// A fine-tune's predictions (GET /api/v1/jobs/<id>/predictions, read from its predictions folder): a page
// of one split in its task kind's terms; every text is a text node, a wrong tag or answer in <mark>.
const PREDICTION_KINDS = ["generation", "span_extraction", "multiple_choice", "token_classification", "classification"];
const PREDICTIONS_PAGE = 20;
let predictionQuery = { split: "", errors_only: false, offset: 0 };

function taggedWords(words) {
  return words.flatMap((w, i) => [i ? " " : "", w.error
    ? el("mark", { class: "tag-error", title: `gold ${w.gold}, predicted ${w.predicted}` }, w.word, el("sub", {}, `${w.predicted}≠${w.gold}`))
    : el("span", { class: "tagged", title: w.gold == null ? `predicted ${w.predicted}` : `gold ${w.gold}` }, w.word,
      w.predicted !== "O" ? el("sub", {}, w.predicted) : "")]);
}

const PREDICTION_TABLES = {
  generation: [["#", "source", "reference(s)", "output"], (x) => [x.index, el("td", { class: "text" }, x.source ?? ""),
    el("td", { class: "text" }, (x.references || []).map((r) => el("div", {}, r))), el("td", { class: "text output" }, x.output ?? "")]],
  span_extraction: [["#", "question", "predicted answer", "gold answers"], (x) => [x.index, x.id,
    el("td", { class: "text" }, x.matches_gold ? x.prediction || "(no answer)" : el("mark", { class: "tag-error" }, x.prediction || "(no answer)")),
    el("td", { class: "text" }, x.gold.length ? x.gold.join(" | ") : "(no answer)")]],
  multiple_choice: [["#", "id", "chosen", "gold", "scores"], (x) => [x.index, x.id,
    x.correct === false ? el("td", {}, el("mark", { class: "tag-error" }, x.prediction)) : x.prediction, x.label ?? "–",
    (x.scores || []).map((v) => Number(v).toFixed(3)).join(" · ")]],
  token_classification: [["#", "errors", "sentence (predicted tags; wrong ones marked with gold)"], (x) => [x.index, x.errors,
    el("td", { class: "text tagged-sentence" }, taggedWords(x.words))]],
  classification: [["#", "id", "predicted", "gold"], (x) => [x.index, x.id,
    x.correct === false ? el("td", {}, el("mark", { class: "tag-error" }, x.prediction)) : x.prediction, x.label ?? "–"]],
};

async function showPredictions(change) {
  predictionQuery = { ...predictionQuery, ...change };
  const p = new URLSearchParams({ limit: PREDICTIONS_PAGE, offset: predictionQuery.offset });
  if (predictionQuery.split) p.set("split", predictionQuery.split);
  if (predictionQuery.errors_only) p.set("errors_only", "true");
  const page = await api(`/api/v1/jobs/${jobId}/predictions?${p}`);
  if (page.missing) {  // the run kept no predictions: its confusion report (if any) shows with the result
    document.getElementById("predictions-info").textContent = `${page.task}: ${page.missing}`;
    document.getElementById("predictions-body").replaceChildren();
    document.getElementById("predictions").hidden = false;
    return;
  }
  const [head, cells] = PREDICTION_TABLES[page.kind];
  const last = Math.min(page.offset + page.examples.length, page.total);
  document.getElementById("predictions-info").textContent =
    `${page.task} · ${page.split} split · ${page.total ? page.offset + 1 : 0}–${last} of ${page.total}${page.errors_only ? " wrong" : ""}`;
  document.getElementById("predictions-body").replaceChildren(
    el("div", { class: "filters small" },
      page.splits.length > 1 ? el("label", {}, "split ", el("select", { onchange: (e) => showPredictions({ split: e.target.value, offset: 0 }) },
        page.splits.map((s) => el("option", { value: s, selected: s === page.split || null }, s)))) : "",
      page.kind === "generation" ? "" : el("label", { class: "check" }, el("input", { type: "checkbox", id: "predictions-errors",
        checked: page.errors_only || null, onchange: (e) => showPredictions({ errors_only: e.target.checked, offset: 0 }) }), " wrong only"),
      el("button", { type: "button", disabled: page.offset === 0 || null,
        onclick: () => showPredictions({ offset: Math.max(0, page.offset - PREDICTIONS_PAGE) }) }, "◀"),
      el("button", { type: "button", disabled: last >= page.total || null,
        onclick: () => showPredictions({ offset: page.offset + PREDICTIONS_PAGE }) }, "▶")),
    page.examples.length ? el("table", { class: `grid small predictions kind-${page.kind}` },
      el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
      el("tbody", {}, page.examples.map((x) => el("tr", { "data-index": x.index },
        cells(x).map((c) => (c instanceof Node ? c : el("td", {}, c)))))))
      : el("p", { class: "empty" }, "no example"));
  document.getElementById("predictions").hidden = false;
}

async function showAttempts(job) {
  const attempts = await api(`/api/v1/jobs/${jobId}/attempts`);
  document.querySelector("#attempts tbody").replaceChildren(...attempts.map((a) => el("tr", {},
    el("td", {}, a.number), el("td", { class: "mono small" }, a.worker_id), el("td", {}, badge(a.status)),
    el("td", {}, a.exit_code ?? ""), el("td", {}, shortTime(a.started_at)), el("td", {}, duration(a.started_at, a.finished_at)),
    el("td", { class: "small" }, attemptError(a, job)))));
}

// An attempt's error in the table: its first line, or a pointer when it is the job's error shown above
// (a failed job's traceback was printed three times: the error box, the attempts, the log).
function attemptError(attempt, job) {
  if (!attempt.error) return "";
  if (job && attempt.error === job.error) return "(the error above)";
  return attempt.error.trim().split("\n").pop();
}

// Colours and cursor moves of a terminal (tqdm, rich, coloured loggers) are noise in a <pre>.
const ANSI = /\u001b(?:\[[0-?]*[ -/]*[@-~]|\][^\u0007\u001b]*(?:\u0007|\u001b\\)|[@-Z\\-_])/g;

function stripAnsi(text) {
  return text.replace(ANSI, "");
}

async function followLog() {
  const log = document.getElementById("log");
  const params = logOffset === null ? `tail=${LOG_TAIL}` : `offset=${logOffset}`;
  const chunk = await api(`/api/v1/jobs/${jobId}/logs?${params}`);
  if (chunk.attempt !== logAttempt) {  // a new attempt: start over with its log
    log.textContent = "";
    if (logOffset !== null && chunk.attempt !== null) { logAttempt = chunk.attempt; logOffset = null; return followLog(); }
    logAttempt = chunk.attempt;
  }
  if (chunk.text) {
    log.textContent += stripAnsi(chunk.text);
    if (log.textContent.length > MAX_LOG_CHARS) log.textContent = log.textContent.slice(-MAX_LOG_CHARS / 2);
    if (document.getElementById("follow").checked) log.scrollTop = log.scrollHeight;
  }
  logOffset = chunk.offset;
  document.getElementById("log-info").textContent = chunk.path ? `attempt ${chunk.attempt} · ${fmtBytes(chunk.size)}` : "(no log yet)";
}

// Live curves from the platform's own store (the worker copies progress.json at each heartbeat): the
// dashboard's chart component (curves.js), one chart per metric, one curve per training (a job that
// trains more than once, a distilled student and its no-teacher control, counts each training's steps
// from its start, so each is its own labelled curve). Grows while the job runs.
function drawCurves(series) {
  if (typeof Plotly === "undefined" || !series.length) return;
  const div = document.getElementById("job-curves");
  div.hidden = false;
  charts ??= new CurveCharts(div, { filename: `job-${jobId}` });
  charts.draw(withValidation(series));
}

// A training's val/ metrics as a series of its own, in the training's colour, so that a validation
// chart's legend says "validation" (or "control run · validation"), not "training".
function withValidation(series) {
  const isValidation = (key) => key.startsWith("val/");
  return series.flatMap((s, i) => {
    const colour = s.colour || PALETTE[i % PALETTE.length];
    const validation = s.points.filter((p) => Object.keys(p).some(isValidation));
    if (!validation.length) return [{ ...s, colour }];
    const only = (p, keep) => Object.fromEntries(Object.entries(p).filter(([k]) => !isValidation(k) === keep || X_KEYS.has(k)));
    return [{ ...s, colour, points: s.points.map((p) => only(p, true)) },
      { ...s, colour, label: s.label === "training" ? "validation" : `${s.label} · validation`, points: validation.map((p) => only(p, false)) }];
  });
}

async function showProgress(job) {
  // Redrawn when the progress or the job's state changes: a job that ended shows its final state
  // only (no phase, steps/s or time left from its last heartbeat).
  const seen = `${job.progress?.updated_at}|${job.status}`;
  if (!job.progress || seen === progressSeen) return;
  progressSeen = seen;
  const p = job.progress;
  const running = job.status === "running";
  document.getElementById("job-progress").replaceChildren(progressBar(p, job.status) || el("span", {}, `${job.status}`),
    el("span", { class: "small", id: "job-progress-text" }, [running && p.phase ? ` phase: ${p.phase}` : "",
      p.epoch != null ? ` · epoch ${p.epoch}` : "",
      running && p.steps_per_s ? ` · ${p.steps_per_s.toPrecision(3)} steps/s` : "",
      running && p.eta_s != null ? ` · ${seconds(p.eta_s)} left` : ""].join("")));
  document.getElementById("job-metrics").replaceChildren(...Object.entries(p.metrics || {}).map(([k, v]) =>
    el("code", { class: "chip", "data-metric": k }, `${k} ${Number(v).toPrecision(4)}`)));
  const { series } = await api(`/api/v1/jobs/${jobId}/progress`);
  await plotlyReady();
  drawCurves(series);
}

async function refresh() {
  const job = await api(`/api/v1/jobs/${jobId}`);
  showJob(job);
  await Promise.all([followLog(), showAttempts(job), showProgress(job)]);
  if (detailStatus !== job.status) {
    // Config, neighbours and results change when the job changes state, not in between.
    detailStatus = job.status;
    const detail = await api(`/api/v1/views/jobs/${jobId}`);
    await plotlyReady();
    showDetail(detail);
  }
  return true;
}

async function action(name) {
  try {
    showJob(await api(`/api/v1/jobs/${jobId}/${name}`, { method: "POST" }));
    flash(name === "cancel" ? `cancel requested for job ${jobId}` : `job ${jobId} queued again`, "info");
    if (name === "retry") logOffset = null;
  } catch (err) {
    flash(`${name}: ${err.message}`);
  }
}

// Name, tags and note: labels only (PATCH /api/v1/jobs/<id>); a tag left out of the list is removed.
async function saveLabels() {
  const form = document.getElementById("label-form");
  const before = (await api(`/api/v1/jobs/${jobId}`)).tags || {};
  const tags = {};
  for (const part of form.elements.tags.value.split(",").map((x) => x.trim()).filter(Boolean)) {
    const at = part.indexOf("=");
    if (at < 1) { flash(`tag ${JSON.stringify(part)} is not key=value`); return; }
    tags[part.slice(0, at).trim()] = part.slice(at + 1).trim();
  }
  for (const key of Object.keys(before)) if (!(key in tags)) tags[key] = null;
  const name = form.elements.name.value.trim();
  try {
    const job = await api(`/api/v1/jobs/${jobId}`, { method: "PATCH",
      body: { ...(name ? { name } : {}), tags, note: form.elements.note.value } });
    document.getElementById("label-tags").replaceChildren(...Object.entries(job.tags).map(([k, v]) => el("code", { class: "chip" }, `${k}=${v}`)));
    flash("saved", "info");
  } catch (err) {
    flash(`labels: ${err.message}`);
  }
}

document.getElementById("label-form").addEventListener("submit", saveLabels);
document.getElementById("cancel-button").addEventListener("click", () => action("cancel"));
document.getElementById("retry-button").addEventListener("click", () => action("retry"));
refresh().catch((err) => flash(err.message));
poll(refresh, 1500);
