// One job: status, actions, pipeline neighbours, attempts, a log tail that follows while it runs.
import { api, badge, duration, el, flash, plotConfig, poll, progressBar, seconds, shortTime } from "/static/js/api.js";

const jobId = Number(document.getElementById("job").dataset.jobId);
const TERMINAL = ["succeeded", "failed", "cancelled"];
const LOG_TAIL = 200;
const MAX_LOG_CHARS = 400_000;
let logOffset = null;
let logAttempt = null;
let detailStatus = null;  // the job status the detail was fetched for
let progressSeen = null;  // updated_at of the progress last drawn

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
  error.textContent = job.error ? `exit code ${job.exit_code ?? "–"}: ${job.error}` : "";
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
  } else if (!detail.job.pipeline_id) {
    graph.replaceChildren(el("p", { class: "empty" }, "No parents or children."));
  }
  if (detail.results.length) {
    document.getElementById("job-results").replaceChildren(el("ul", {}, detail.results.map((r) =>
      el("li", {}, el("a", { href: `/runs/${r.id}` }, `result #${r.id}`), ` (${r.kind})`,
        r.throughput ? speedTable(r.throughput) : ""))));
  }
  document.getElementById("config-source").textContent = detail.config_source ? `(${detail.config_source})` : "";
  document.getElementById("config").textContent = detail.config ? toYaml(detail.config).trimStart() : "–";
}

async function showAttempts() {
  const attempts = await api(`/api/v1/jobs/${jobId}/attempts`);
  document.querySelector("#attempts tbody").replaceChildren(...attempts.map((a) => el("tr", {},
    el("td", {}, a.number), el("td", { class: "mono small" }, a.worker_id), el("td", {}, badge(a.status)),
    el("td", {}, a.exit_code ?? ""), el("td", {}, shortTime(a.started_at)), el("td", {}, duration(a.started_at, a.finished_at)),
    el("td", { class: "small" }, a.error || ""))));
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
    log.textContent += chunk.text;
    if (log.textContent.length > MAX_LOG_CHARS) log.textContent = log.textContent.slice(-MAX_LOG_CHARS / 2);
    if (document.getElementById("follow").checked) log.scrollTop = log.scrollHeight;
  }
  logOffset = chunk.offset;
  document.getElementById("log-info").textContent = chunk.path ? `attempt ${chunk.attempt} · ${chunk.size} bytes` : "(no log yet)";
}

// Live curves from the platform's own store (the worker copies progress.json at each heartbeat):
// losses on the left axis, task metrics on the right, the learning rate on its own (log) axis.
// One curve per training and metric: a job that trains more than once (a distilled student, then
// its no-teacher control) counts each training's steps from its start, and one line through all
// its points would run back in x. Each training gets its own colour, named in the legend.
// Grows while the job runs.
function drawCurves(series) {
  const div = document.getElementById("job-curves");
  const keys = [...new Set(series.flatMap((s) => s.points.flatMap((p) => Object.keys(p))))].filter((k) => k !== "step").sort();
  if (!keys.length || typeof Plotly === "undefined") return;
  div.hidden = false;
  const several = series.length > 1;
  const traces = series.flatMap((s, i) => keys.map((key) => {
    const points = s.points.filter((p) => key in p);
    const axis = key.includes("loss") ? "y" : key === "lr" || key.endsWith("/lr") ? "y3" : "y2";
    return { name: several ? `${s.label}: ${key}` : key, x: points.map((p) => p.step), y: points.map((p) => p[key]),
      mode: points.length > 40 ? "lines" : "lines+markers", yaxis: axis,
      legendgroup: several ? s.label : undefined, meta: { series: s.name },
      line: { dash: key.startsWith("val/") ? "dot" : axis === "y3" ? "dashdot" : "solid",
        color: several ? SERIES_COLOURS[i % SERIES_COLOURS.length] : undefined } };
  }).filter((t) => t.x.length));
  Plotly.react(div, traces, {
    height: 300, margin: { t: 20, r: 110, b: 40, l: 55 }, legend: { orientation: "h", y: -0.25 },
    xaxis: { title: { text: several ? "step (of each training)" : "step" }, domain: [0, 0.88] }, yaxis: { title: { text: "loss" } },
    yaxis2: { overlaying: "y", side: "right", showgrid: false, title: { text: "metrics" } },
    yaxis3: { overlaying: "y", side: "right", anchor: "free", position: 0.97, type: "log", showgrid: false,
      title: { text: "lr" } },
  }, plotConfig(`job-${jobId}-curves`));
}
const SERIES_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];

async function showProgress(job) {
  if (!job.progress || job.progress.updated_at === progressSeen) return;
  progressSeen = job.progress.updated_at;
  const p = job.progress;
  document.getElementById("job-progress").replaceChildren(progressBar(p, job.status),
    el("span", { class: "small" }, [p.phase ? ` phase: ${p.phase}` : "", p.epoch != null ? ` · epoch ${p.epoch}` : "",
      p.steps_per_s ? ` · ${p.steps_per_s.toPrecision(3)} steps/s` : "",
      job.status === "running" && p.eta_s != null ? ` · ${seconds(p.eta_s)} left` : ""].join("")));
  document.getElementById("job-metrics").replaceChildren(...Object.entries(p.metrics || {}).map(([k, v]) =>
    el("code", { class: "chip", "data-metric": k }, `${k} ${Number(v).toPrecision(4)}`)));
  const { series } = await api(`/api/v1/jobs/${jobId}/progress`);
  drawCurves(series);
}

async function refresh() {
  const job = await api(`/api/v1/jobs/${jobId}`);
  showJob(job);
  await Promise.all([followLog(), showAttempts(), showProgress(job)]);
  if (detailStatus !== job.status) {
    // Config, neighbours and results change when the job changes state, not in between.
    detailStatus = job.status;
    showDetail(await api(`/api/v1/views/jobs/${jobId}`));
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

document.getElementById("cancel-button").addEventListener("click", () => action("cancel"));
document.getElementById("retry-button").addEventListener("click", () => action("retry"));
refresh().catch((err) => flash(err.message));
poll(refresh, 1500);
