// Metric curves: the one chart component of the job, run and compare pages. One small chart per
// metric, in sections by prefix (val/, train/, test/, throughput, then the rest) that collapse;
// every metric is drawn, none capped. Controls: the x-axis (step, and epoch, wall time, tokens seen
// where the points carry them), a log y-axis, smoothing (TensorBoard's debiased exponential moving
// average, the raw curve kept faint behind it) and a metric filter, kept in the page's URL (x, log,
// smooth, match) so that a link or a reload shows the same view. Every chart downloads as PNG or SVG.
//
// Data: series = [{label, colour, points: [{step, epoch?, time_s?, tokens?, "<metric>": value, ...}]}]
// (a job's progress history, ptmlab.contracts.progress, or a run's MLflow history joined by step).
import { PALETTE, el, plotConfig, query, setQuery } from "/static/js/api.js";

// Where a point lies on each x-axis (ptmlab.contracts.progress AXIS_KEYS); every other number is a metric.
export const X_AXES = [
  { key: "step", label: "step" },
  { key: "epoch", label: "epoch" },
  { key: "time_s", label: "wall time" },
  { key: "tokens", label: "tokens seen" },
];
const AXIS_KEYS = new Set(X_AXES.map((a) => a.key));
const GROUP_ORDER = ["val", "train", "test", "throughput"];
const THROUGHPUT = /per_s|throughput|mfu|latency|_ms$/;
const MARKERS_UP_TO = 40;  // points per curve drawn with markers; longer curves are lines only
// Charts drawn open at first; the sections after them start collapsed (their count in the heading)
// and draw when opened, so that a run with hundreds of metrics opens quickly and hides none.
const OPEN_CHARTS = 24;
// A chart's height, on its div too: a responsive plot takes its first height from its container.
const CHART_HEIGHT = 280;

// TensorBoard's smoothing: an exponential moving average debiased at the start (so the first
// points are not pulled towards 0); a constant series and non-finite values are left as they are.
export function ema(values, weight) {
  if (!(weight > 0)) return values.slice();
  const finite = values.filter(Number.isFinite);
  const constant = finite.every((v) => v === finite[0]);
  let last = 0;
  let n = 0;
  return values.map((v) => {
    if (constant || !Number.isFinite(v)) return v;
    last = last * weight + (1 - weight) * v;
    n += 1;
    return weight === 1 ? last : last / (1 - weight ** n);
  });
}

// The section a metric is drawn in: throughput numbers together, else the prefix before "/".
export function groupOf(key) {
  if (THROUGHPUT.test(key)) return "throughput";
  if (key.includes("/")) return key.split("/")[0];
  return key === "lr" ? "train" : "other";
}

// A section's heading: its prefix in words.
const GROUP_LABELS = { val: "validation", train: "training", test: "test", throughput: "throughput", other: "other" };

// A chart's y-axis title: the metric's name with its unit where the name carries one.
export function yTitle(key) {
  const name = key.includes("/") ? key.slice(key.indexOf("/") + 1) : key;
  if (/_ms$/.test(name)) return `${name.slice(0, -3)} (ms)`;
  if (/per_s|_per_sec/.test(name)) return `${name} (per second)`;
  if (/(_s|_seconds)$/.test(name)) return `${name.replace(/(_s|_seconds)$/, "")} (s)`;
  if (/bytes$/.test(name)) return `${name} (bytes)`;
  if (/(^|_)(accuracy|acc|f1|precision|recall|exact_match|em)($|_)/.test(name) && !/%/.test(name)) return `${name} (0–1)`;
  return name;
}

function groupRank(name) {
  const i = GROUP_ORDER.indexOf(name);
  return i >= 0 ? i : name === "other" ? GROUP_ORDER.length + 1 : GROUP_ORDER.length;
}

// A d3 format that reads at the axis' magnitude: SI prefixes for large numbers (12k, 3.4M, not
// 526465M), exponents for tiny ones (learning rates: 5e-5), plain digits in between; a log axis
// always gets one so that its in-between ticks are not bare digits ("2", "5" meaning 0.2, 0.5).
export function tickFormat(values, log = false) {
  const big = values.reduce((m, v) => (Number.isFinite(v) ? Math.max(m, Math.abs(v)) : m), 0);
  if (big >= 1e4) return ".3~s";
  if (big > 0 && big < 1e-3) return ".2~e";
  return log ? ".3~g" : "";
}

// Wall time in the unit that keeps the ticks short.
function timeUnit(maxSeconds) {
  if (maxSeconds > 3 * 3600) return { div: 3600, label: "wall time (h)" };
  if (maxSeconds > 180) return { div: 60, label: "wall time (min)" };
  return { div: 1, label: "wall time (s)" };
}

function isNumber(v) {
  return typeof v === "number" && Number.isFinite(v);
}

export class CurveCharts {
  // root: the element the controls and charts go in; filename: the download names' prefix.
  constructor(root, { filename }) {
    this.root = root;
    this.filename = filename;
    this.series = [];
    this.charts = new Map();  // metric -> its chart div
    this.groups = new Map();  // group -> its <details>
    const q = query();
    const smooth = Number(q.get("smooth"));
    this.state = { x: q.get("x") || "step", log: q.get("log") === "1", match: q.get("match") || "",
      smooth: Number.isFinite(smooth) ? Math.min(0.99, Math.max(0, smooth)) : 0 };
    this.xSelect = el("select", { id: "curve-x", "aria-label": "x-axis" });
    this.logBox = el("input", { type: "checkbox", id: "curve-log", ...(this.state.log ? { checked: "" } : {}) });
    this.smoothRange = el("input", { type: "range", id: "curve-smooth", min: 0, max: 0.99, step: 0.01, value: this.state.smooth,
      "aria-label": "smoothing" });
    this.smoothText = el("output", { id: "curve-smooth-value" }, this.state.smooth.toFixed(2));
    this.filter = el("input", { id: "curve-filter", size: 16, placeholder: "e.g. loss", value: this.state.match });
    this.info = el("span", { class: "small", id: "curve-info" });
    this.box = el("div", { class: "curve-groups" });
    root.replaceChildren(el("form", { class: "filters curve-controls", onsubmit: "return false" },
      el("label", {}, "x-axis ", this.xSelect),
      el("label", { title: "log y-axis on every chart whose values are all positive" }, this.logBox, " log scale"),
      el("label", { title: "exponential moving average, as TensorBoard's; the raw curve stays faint behind" },
        "smoothing ", this.smoothRange, " ", this.smoothText),
      el("label", {}, "metrics matching ", this.filter), this.info), this.box);
    this.xSelect.addEventListener("change", () => this.set({ x: this.xSelect.value }));
    this.logBox.addEventListener("change", () => this.set({ log: this.logBox.checked }));
    this.smoothRange.addEventListener("input", () => this.set({ smooth: Number(this.smoothRange.value) }));
    this.filter.addEventListener("input", () => this.set({ match: this.filter.value.trim() }));
  }

  set(change) {
    Object.assign(this.state, change);
    this.smoothText.textContent = this.state.smooth.toFixed(2);
    setQuery({ x: this.state.x === "step" ? "" : this.state.x, log: this.state.log ? "1" : "",
      smooth: this.state.smooth ? this.state.smooth : "", match: this.state.match });
    this.render();
  }

  // Draw (or redraw, as a live job's history grows) these series; returns how many metrics they hold.
  draw(series) {
    this.series = series.map((s, i) => ({ ...s, colour: s.colour || PALETTE[i % PALETTE.length] }));
    this.render();
    return this.metrics().length;
  }

  metrics() {
    const keys = new Set();
    for (const s of this.series) for (const p of s.points) for (const [k, v] of Object.entries(p)) if (!AXIS_KEYS.has(k) && isNumber(v)) keys.add(k);
    return [...keys].sort();
  }

  axes() {
    return X_AXES.filter((a) => this.series.some((s) => s.points.some((p) => isNumber(p[a.key]))));
  }

  render() {
    const axes = this.axes();
    if (this.xSelect.options.length !== axes.length || axes.some((a, i) => this.xSelect.options[i].value !== a.key)) {
      this.xSelect.replaceChildren(...axes.map((a) => el("option", { value: a.key }, a.label)));
    }
    const x = axes.some((a) => a.key === this.state.x) ? this.state.x : "step";  // an axis these points lack: steps
    this.xSelect.value = x;
    const all = this.metrics();
    const match = this.state.match.toLowerCase();
    const keys = all.filter((k) => !match || k.toLowerCase().includes(match));
    const byGroup = new Map();
    for (const k of keys) {
      const g = groupOf(k);
      if (!byGroup.has(g)) byGroup.set(g, []);
      byGroup.get(g).push(k);
    }
    const order = [...byGroup.keys()].sort((a, b) => groupRank(a) - groupRank(b) || a.localeCompare(b));
    this.info.textContent = `${keys.length}${keys.length === all.length ? "" : ` of ${all.length}`} metrics`;
    for (const [key, div] of this.charts) {
      if (!keys.includes(key)) { Plotly.purge(div); div.remove(); this.charts.delete(key); }
    }
    for (const [name, section] of this.groups) {
      if (!byGroup.has(name)) { section.remove(); this.groups.delete(name); }
    }
    let before = 0;  // charts in the sections above
    for (const name of order) {
      let section = this.groups.get(name);
      if (!section) {
        section = el("details", { class: "curve-group", open: before < OPEN_CHARTS, "data-group": name },
          el("summary", {}, name), el("div", { class: "chart-grid" }));
        section.addEventListener("toggle", () => {
          if (!section.open) return;
          for (const div of section.querySelectorAll(".small-chart")) {
            if (div.dataset.stale) this.plot(div.dataset.metric, this.drawn.x, this.drawn.unit);
            else Plotly.Plots.resize(div);
          }
        });
        this.groups.set(name, section);
      }
      before += byGroup.get(name).length;
      const members = byGroup.get(name);
      section.querySelector("summary").textContent = `${GROUP_LABELS[name] ?? name} (${members.length})`;
      // Small sections share a row (a lone val/ chart beside a lone train/ one), big ones take it whole.
      section.style.flex = `1 1 ${Math.min(members.length, 3) * 440}px`;
      const grid = section.querySelector(".chart-grid");
      for (const key of members) {
        let div = this.charts.get(key);
        if (!div) {
          div = el("div", { class: "chart small-chart", "data-metric": key, style: `height: ${CHART_HEIGHT}px` });
          this.charts.set(key, div);
        }
        grid.append(div);  // in order (an existing chart moves, keeping its plot)
      }
      this.box.append(section);
    }
    const unit = x === "time_s"
      ? timeUnit(Math.max(0, ...this.series.flatMap((s) => s.points.map((p) => (isNumber(p.time_s) ? p.time_s : 0)))))
      : { div: 1, label: X_AXES.find((a) => a.key === x).label };
    this.drawn = { x, unit };
    for (const key of keys) {
      const div = this.charts.get(key);
      if (div.closest("details").open) this.plot(key, x, unit);
      else div.dataset.stale = "1";  // drawn when its section opens
    }
  }

  plot(key, x, unit) {
    const { smooth, log } = this.state;
    const traces = [];
    const xs = [];
    const ys = [];
    for (const s of this.series) {
      const points = s.points.filter((p) => isNumber(p[key]) && isNumber(p[x]));
      if (!points.length) continue;
      const px = points.map((p) => p[x] / unit.div);
      const py = points.map((p) => p[key]);
      xs.push(...px);
      ys.push(...py);
      const base = { type: "scatter", x: px, name: s.label, legendgroup: s.label,
        mode: points.length === 1 ? "markers" : points.length > MARKERS_UP_TO ? "lines" : "lines+markers",
        line: { color: s.colour }, marker: { color: s.colour, size: 5 } };
      if (smooth > 0 && points.length > 2) {
        traces.push({ ...base, y: py, opacity: 0.25, showlegend: false, hoverinfo: "skip",
          meta: { series: s.label, metric: key, role: "raw" } });
        traces.push({ ...base, y: ema(py, smooth), mode: "lines", meta: { series: s.label, metric: key, role: "smoothed" } });
      } else {
        traces.push({ ...base, y: py, meta: { series: s.label, metric: key, role: "values" } });
      }
    }
    const yLog = log && ys.length > 0 && ys.every((v) => v > 0);
    // Plotly labels every 1..9 multiple on a log axis spanning a decade or so, which piles up on a
    // small chart: 1-2-5 ticks up to two decades, one per decade beyond.
    const decades = yLog ? Math.log10(Math.max(...ys) / Math.min(...ys)) : 0;
    const yTicks = decades > 2 ? { dtick: 1 } : decades > 0.5 ? { dtick: "D2" } : { nticks: 5 };
    const div = this.charts.get(key);
    delete div.dataset.stale;
    Plotly.react(div, traces, {
      title: { text: key, font: { size: 13 } }, height: CHART_HEIGHT, margin: { t: 30, r: 10, b: 40, l: 55 },
      xaxis: { title: { text: unit.label }, tickformat: tickFormat(xs), automargin: true },
      yaxis: { title: { text: yTitle(key) }, type: yLog ? "log" : "linear", tickformat: tickFormat(ys, yLog), automargin: true,
        ...(yLog ? yTicks : {}) },
      showlegend: true, legend: { orientation: "h", y: -0.3, font: { size: 10 } }, hovermode: "closest",
      uirevision: `${key}|${x}|${yLog}`,  // a live redraw keeps the user's zoom until the axes change
    }, plotConfig(`${this.filename}-${key.replace(/\W+/g, "_")}`));
  }
}
