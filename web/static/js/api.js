// Shared helpers of the dashboard's pages: calling the API, building DOM, formatting numbers.

const TOKEN_KEY = "ptmlab-api-token";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function token() {
  return localStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) localStorage.setItem(TOKEN_KEY, value);
  else localStorage.removeItem(TOKEN_KEY);
}

// A page's requests numbered: an answer to an older one that arrives after a newer one started
// (typing, two controls changed in quick succession) is stale and dropped, never drawn over it.
export function requestCounter() {
  let latest = 0;
  return { next: () => ++latest, stale: (n) => n !== latest };
}

// fetch JSON from the API; errors become ApiError with the API's {error: {code, message}}.
export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  // Reads too: bound beyond loopback, the API wants the token for logs, predictions and configs.
  if (token()) headers.Authorization = `Bearer ${token()}`;
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) {
    const err = (data && data.error) || {};
    throw new ApiError(response.status, err.code || `http_${response.status}`, err.message || text || response.statusText);
  }
  return data;
}

// el("a", {href: "/x", class: "y"}, "text", childNode, ...)
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function flash(message, kind = "error") {
  const box = document.getElementById("flash");
  if (!box) return;
  box.textContent = message;
  box.className = `flash ${kind}`;
  box.hidden = !message;
}

export function fmt(value, digits = 1) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  return Number(value).toFixed(digits);
}

// 4 400 000 -> "4.40M"
export function human(value) {
  if (value === null || value === undefined) return "–";
  const abs = Math.abs(value);
  for (const [div, unit] of [[1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (abs >= div) return `${(value / div).toFixed(2)}${unit}`;
  }
  return Number.isInteger(value) ? String(value) : value.toPrecision(3);
}

// Scores in a column share their decimals: 1 -> "1.0000" beside "0.9950", never "1".
export function fmtScore(value, digits = 4) {
  if (value === null || value === undefined || value === "" || Number.isNaN(Number(value))) return "–";
  const v = Number(value);
  return Math.abs(v) >= 1e4 ? v.toLocaleString("en", { maximumFractionDigits: 0 }) : v.toFixed(digits);
}

// Sizes one way everywhere: 68977776 -> "65.8 MiB" (binary units, as `du -h` and PyTorch report them).
export function fmtBytes(value) {
  if (value === null || value === undefined || value === "" || Number.isNaN(Number(value))) return "–";
  const v = Number(value);
  const abs = Math.abs(v);
  for (const [div, unit] of [[2 ** 30, "GiB"], [2 ** 20, "MiB"], [2 ** 10, "KiB"]]) {
    if (abs >= div) return `${(v / div).toFixed(1)} ${unit}`;
  }
  return `${v} B`;
}

// Parameter counts: 4400000 -> "4.40M", 128000 -> "128k".
export function fmtParams(value) {
  if (value === null || value === undefined || value === "" || Number.isNaN(Number(value))) return "–";
  const v = Number(value);
  const abs = Math.abs(v);
  if (abs >= 1e9) return `${(v / 1e9).toFixed(2)}G`;
  if (abs >= 1e6) return `${(v / 1e6).toFixed(2)}M`;
  if (abs >= 1e3) return `${(v / 1e3).toFixed(abs >= 1e5 ? 0 : 1)}k`;
  return String(v);
}

// A named value formatted by what its name says it is: sizes, parameter counts, counts, scores.
export function fmtNamed(key, value) {
  if (typeof value !== "number") return value === null || value === undefined ? "–" : String(value);
  const name = String(key).toLowerCase();
  if (/(^|[_./])(size_bytes|bytes|size)$|_bytes$/.test(name)) return fmtBytes(value);
  if (/(^|[_./])(params|num_params|parameters|trainable_params)$/.test(name)) return fmtParams(value);
  if (Number.isInteger(value)) return value.toLocaleString("en");
  return fmtScore(value);
}

// One formatter for a column (or a row) of numbers, so that they read alike: sizes and parameter
// counts in their units; any fraction among them (or a score's name) gives every number four
// decimals ("1.0000" beside "0.9950"); else whole numbers.
export function columnFormat(key, values) {
  const name = String(key);
  const unit = fmtNamed(name, 1234567) !== fmtNamed("count", 1234567);  // a size or a parameter count
  const fractional = /^main_score|score$|^metrics\./.test(name)
    || values.some((v) => typeof v === "number" && !Number.isInteger(v));
  return (v) => (typeof v === "number" && fractional && !unit ? fmtScore(v) : fmtNamed(name, v));
}

export function parseTime(iso) {
  return iso ? new Date(iso.endsWith("Z") ? iso : `${iso}Z`) : null;
}

export function duration(startIso, endIso) {
  const start = parseTime(startIso);
  if (!start) return "";
  const end = parseTime(endIso) || new Date();
  let s = Math.max(0, Math.round((end - start) / 1000));
  const h = Math.floor(s / 3600); s -= 3600 * h;
  const m = Math.floor(s / 60); s -= 60 * m;
  return h ? `${h}h${String(m).padStart(2, "0")}m` : m ? `${m}m${String(s).padStart(2, "0")}s` : `${s}s`;
}

export function shortTime(iso) {
  const t = parseTime(iso);
  return t ? t.toISOString().replace("T", " ").slice(0, 19) : "";
}

export function badge(status) {
  return el("span", { class: `badge state-${status}` }, status);
}

// Repeat `fn` every `ms` while the tab is visible; `fn` returning false stops it.
export function poll(fn, ms) {
  let timer = null;
  let stopped = false;
  const tick = async () => {
    if (stopped) return;
    let again = true;
    if (!document.hidden) {
      try { again = (await fn()) !== false; } catch (err) { console.error(err); }
    }
    if (again && !stopped) timer = setTimeout(tick, ms);
  };
  timer = setTimeout(tick, ms);
  return () => { stopped = true; clearTimeout(timer); };
}

export function query() {
  return new URLSearchParams(window.location.search);
}

// Keep the page's filter state in its URL, so a link or a reload shows the same view.
export function setQuery(params) {
  const url = new URL(window.location.href);
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === "") url.searchParams.delete(key);
    else url.searchParams.set(key, value);
  }
  history.replaceState(null, "", url);
}

export const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
  "#17becf", "#7f7f7f", "#bcbd22"];

// Seconds -> "1h05m", "3m20s", "42s".
export function seconds(s) {
  if (s === null || s === undefined) return "";
  s = Math.max(0, Math.round(s));
  const h = Math.floor(s / 3600); s -= 3600 * h;
  const m = Math.floor(s / 60); s -= 60 * m;
  return h ? `${h}h${String(m).padStart(2, "0")}m` : m ? `${m}m${String(s).padStart(2, "0")}s` : `${s}s`;
}

// The main loss of a progress report: train/loss, else the first train/ metric.
export function mainLoss(metrics) {
  if (!metrics) return null;
  if ("train/loss" in metrics) return ["loss", metrics["train/loss"]];
  const key = Object.keys(metrics).find((k) => k.startsWith("train/") && k.includes("loss"));
  return key ? [key.replace("train/", ""), metrics[key]] : null;
}

// A job's progress (ptmlab.contracts.progress) as a bar with step/total, the loss and the ETA.
const TERMINAL_STATES = ["succeeded", "failed", "cancelled"];

export function progressBar(progress, status) {
  if (!progress || progress.step == null) return "";
  const total = progress.total_steps;
  // A job that ended without a training step (a probe, a measurement) has no steps to show.
  if (TERMINAL_STATES.includes(status) && !progress.step && !total) return "";
  const bar = el("progress", { class: "job-progress", max: total || 1, value: total ? Math.min(progress.step, total) : 0 });
  const parts = [total ? `${progress.step}/${total}` : `step ${progress.step}`];
  const loss = mainLoss(progress.metrics);
  if (loss) parts.push(`${loss[0]} ${Number(loss[1]).toPrecision(4)}`);
  if (status === "running" && progress.eta_s != null) parts.push(`ETA ${seconds(progress.eta_s)}`);
  if (status === "running" && progress.phase && progress.phase !== "training") parts.push(progress.phase);
  return el("span", { class: "progress-cell", "data-step": progress.step, "data-total": total ?? "" }, bar,
    el("span", { class: "small progress-text" }, parts.join(" · ")));
}

// Plotly's config for every chart: its modebar keeps "download as PNG" (Plotly's own export) and
// gains "download as SVG" for papers; `name` becomes the file name. No "Share chart" button (Plotly
// 4 shows one by default; it uploads to Plotly Cloud, which an offline dashboard has no account on).
if (typeof Plotly !== "undefined") Plotly.setPlotConfig({ showSendToCloud: false, displaylogo: false });

// Pages that load Plotly with `async` fetch their data while the bundle is parsed and wait for it
// here before drawing (with `defer`, their scripts would start only once Plotly had run).
let plotlyLoaded = null;

export function plotlyReady() {
  plotlyLoaded ??= new Promise((resolve, reject) => {
    const ready = () => {
      Plotly.setPlotConfig({ showSendToCloud: false, displaylogo: false });
      resolve(Plotly);
    };
    if (typeof Plotly !== "undefined") { ready(); return; }
    const script = document.querySelector('script[src^="/static/vendor/plotly"]');
    if (!script) { reject(new Error("this page loads no Plotly")); return; }
    script.addEventListener("load", ready, { once: true });
    script.addEventListener("error", () => reject(new Error("Plotly did not load")), { once: true });
  });
  return plotlyLoaded;
}

export function plotConfig(name) {
  return {
    responsive: true, displaylogo: false, showSendToCloud: false,
    toImageButtonOptions: { format: "png", filename: name, scale: 2 },
    modeBarButtonsToAdd: [{
      name: "downloadSvg", title: "Download plot as SVG", icon: Plotly.Icons.disk,
      click: (gd) => Plotly.downloadImage(gd, { format: "svg", filename: name }),
    }],
  };
}
