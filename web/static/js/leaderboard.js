// A benchmark's leaderboard (?benchmark=glue|superglue|tasks|generation): rows by configuration, a
// column per task, the benchmark's average where it has one (not tasks, generation), each row's footprint (trainable parameters, delta size), sortable,
// filterable (by sweep, tag, adaptation mode), exportable.
import { api, el, flash, fmt, query, requestCounter, setQuery } from "/static/js/api.js";

const form = document.getElementById("lb-filters");
const table = document.getElementById("leaderboard");
let data = null;
let picked = [];  // row labels chosen for the two-row comparison (at most two, oldest dropped)
let sort = { column: query().get("sort") || "glue", desc: query().get("order") !== "asc" };
// Ticked adaptation modes; none ticked: every mode. Kept across reloads of the options.
let modes = new Set((query().get("adaptation") || "").split(",").filter(Boolean));
// The footprint columns: [label, sort column, sub-label, footprint key of the raw value, of the text].
const FOOTPRINT = [
  ["trainable", "fp:trainable_params", "params", "trainable_params", "trainable"],
  ["% trainable", "fp:trainable_pct", "of all", "trainable_pct", "trainable_pct"],
  ["delta", "fp:delta_bytes", "per task", "delta_bytes", "delta"],
];

function filterParams() {
  const p = new URLSearchParams();
  for (const name of ["sweep_id", "tag", "group_by"]) {
    const value = form.elements[name].value.trim();
    if (value) p.set(name, value);
  }
  // GLUE is the default board: its URL stays without the parameter
  if (form.elements.benchmark.value && form.elements.benchmark.value !== "glue") p.set("benchmark", form.elements.benchmark.value);
  if (modes.size) p.set("adaptation", [...modes].sort().join(","));
  if (form.elements.pool.checked) p.set("pool", "true");
  return p;
}

function modeBoxes(available) {
  const values = [...new Set([...available, ...modes])].sort();
  document.getElementById("mode-boxes").replaceChildren(...values.map((v) => el("label", { class: "check" },
    el("input", { type: "checkbox", value: v, checked: modes.has(v) || null, onchange: (e) => {
      if (e.target.checked) modes.add(v); else modes.delete(v);
      load();
    } }), v)));
}

function setOptions(select, values, current, anyLabel) {
  select.replaceChildren(el("option", { value: "" }, anyLabel), ...values.map((v) => el("option", { value: v }, v)));
  select.value = values.includes(current) ? current : "";
}

function statText(s) {
  if (!s || s.mean === null) return "–";
  return s.std === null ? fmt(s.mean) : `${fmt(s.mean)}±${fmt(s.std)}`;
}

function sortValue(row, column) {
  if (column === "config:label") return row.label;
  if (column === "glue") return row.average;
  if (column.startsWith("config:")) return row.config[column.slice(7)];
  if (column.startsWith("fp:")) return row.footprint[column.slice(3)];
  const cell = row.cells[column.slice(5)];
  return cell ? cell.mean : null;
}

function sortedRows() {
  const rows = [...data.rows];
  const dir = sort.desc ? -1 : 1;
  rows.sort((a, b) => {
    const va = sortValue(a, sort.column);
    const vb = sortValue(b, sort.column);
    if (va === null || va === undefined) return (vb === null || vb === undefined) ? 0 : 1;  // empty last
    if (vb === null || vb === undefined) return -1;
    return (typeof va === "string" ? va.localeCompare(vb) : va - vb) * dir;
  });
  return rows;
}

function header(label, column, sub) {
  const active = sort.column === column;
  return el("th", {
    class: `sortable${active ? " sorted" : ""}`, "data-column": column, tabindex: "0",
    "aria-sort": active ? (sort.desc ? "descending" : "ascending") : "none",
    onclick: () => {
      sort = { column, desc: active ? !sort.desc : !column.startsWith("config:") };
      setQuery({ sort: column, order: sort.desc ? "desc" : "asc" });
      render();
    },
  }, label, sub ? el("div", { class: "sub" }, sub) : null, active ? (sort.desc ? " ▼" : " ▲") : "");
}

function cell(row, task) {
  const c = row.cells[task.task];
  if (!c) return el("td", { class: "num empty-cell" }, "");
  const text = task.metrics.map((m) => statText(c.metrics[m])).join(" / ");
  // n counts every run shown; a cell pooling runs of different configs names the keys that differ.
  const spread = c.spread === "runs" ? `± over runs (${c.varying.join(", ")} differ)` : "± over seeds";
  const title = [`${task.name}: score ${statText(c)} over ${c.n} run(s) ${spread}, seeds [${c.seeds.join(", ")}]`,
    c.degenerate ? `${c.degenerate.runs} run(s) at or below the majority-class baseline ${fmt(c.degenerate.baseline)}` : "",
    c.multitask ? `${c.multitask_runs} multi-task run(s)` : "", ...c.flags].filter(Boolean).join("\n");
  const jobs = (c.job_ids || []).filter((id) => id !== null);
  return el("td", {
    class: `num clickable${c.flags.length ? " flagged" : ""}${c.spread === "runs" ? " mixed" : ""}`, title,
    "data-task": task.task, "data-mean": c.mean ?? "", "data-n": c.n, "data-same-seed-runs": c.same_seed_runs ?? 0,
    "data-multitask-runs": c.multitask_runs ?? 0, "data-spread": c.spread, "data-varying": c.varying.join(","),
    onclick: () => { if (jobs.length) window.location.href = `/compare?jobs=${jobs.slice(0, 10).join(",")}`; },
  }, text, el("span", { class: "n" }, ` n=${c.n}`),
  c.spread === "runs" ? el("span", { class: "mixed-mark", title: `± over runs: ${c.varying.join(", ")} differ` },
    ` ⚠ over runs (${c.varying.join(", ")})`) : null,
  c.degenerate ? el("span", { class: "flag", title: `majority-class baseline ${fmt(c.degenerate.baseline)}` },
    ` ≤ baseline ${fmt(c.degenerate.baseline)}`) : null,
  c.multitask ? el("span", { class: "mt-mark", title: "multi-task run" }, " MT") : null,
  c.flags.length ? el("span", { class: "flag" }, " !") : null);
}

// Older runs recorded no footprint: "—", never an error.
function footprintCells(row) {
  return FOOTPRINT.map(([, , , key, text]) => el("td", { class: "num footprint", "data-footprint": key,
    "data-value": row.footprint?.[key] ?? "" }, row.footprint?.text?.[text] ?? "—"));
}

function label(row) { return row.label; }

function pick(row, checked) {
  picked = picked.filter((l) => l !== label(row));
  if (checked) picked.push(label(row));
  if (picked.length > 2) picked = picked.slice(-2);
  render();
  compare();
}

function sig(v, digits = 2) { return v === null || v === undefined ? "–" : Number(v).toFixed(digits); }

// Two rows over their seeds: difference of means per task; a 95 % CI and p-value only where the
// seeds support one (ptmlab.stats), otherwise why not and the raw values.
async function compare() {
  const box = document.getElementById("lb-compare");
  if (picked.length < 2) {
    box.replaceChildren(picked.length ? el("p", { class: "hint" }, `Compare ${picked[0]} with… (tick a second row)`) : "");
    return;
  }
  const p = filterParams();
  p.set("a", picked[0]);
  p.set("b", picked[1]);
  let result;
  try {
    result = await api(`/api/v1/views/leaderboard/compare?${p}`);
  } catch (err) {
    flash(`compare: ${err.message}`);
    return;
  }
  const warnings = [...new Set(result.comparisons.filter((c) => c.reason).map((c) => `${c.name}: ${c.reason}`))];
  const values = (xs) => xs.map((v) => sig(v, 1)).join(", ");
  box.replaceChildren(
    el("h2", {}, "A − B over seeds"),
    el("p", { class: "small" }, `A = ${result.a} · B = ${result.b}`),
    el("table", { class: "grid small", id: "compare-table" },
      el("thead", {}, el("tr", {}, ["task", "A mean (n)", "B mean (n)", "A − B", "95 % CI", "p", "test", "values A | B"].map((h) => el("th", {}, h)))),
      el("tbody", {}, result.comparisons.map((c) => el("tr", { "data-task": c.task, "data-p": c.p_value ?? "",
        "data-ci-low": c.ci_low ?? "", "data-ci-high": c.ci_high ?? "", "data-diff": c.diff },
        el("td", {}, c.name), el("td", { class: "num" }, `${sig(c.a_mean)} (${c.a_n})`),
        el("td", { class: "num" }, `${sig(c.b_mean)} (${c.b_n})`), el("td", { class: "num" }, sig(c.diff)),
        el("td", { class: "num" }, c.ci_low === null ? "–" : `[${sig(c.ci_low)}, ${sig(c.ci_high)}]`),
        el("td", { class: "num" }, c.p_value === null ? "–" : c.p_value < 0.001 ? "<0.001" : sig(c.p_value, 3)),
        el("td", { class: "test" }, c.test ? `${c.test} (n ${c.a_n} vs ${c.b_n}${c.paired_seeds ? `, seeds ${c.paired_seeds.join(",")}` : ""})`
          : c.reason.startsWith("n too small") ? "n too small" : "pooled configs"),
        el("td", { class: "num small" }, `${values(c.a_values)} | ${values(c.b_values)}`))))),
    warnings.length ? el("ul", { class: "small warning", id: "compare-warnings" }, warnings.map((w) => el("li", {}, w))) : "",
  );
}

// The average column only where some row has the benchmark's average (a board of non-GLUE tasks
// would read "– (0)" on every row).
function averaged() {
  return data.benchmark.averaged !== false && data.rows.some((r) => r.average !== null && r.average !== undefined);
}

// The title names what the board shows: GLUE's board holds every task, so one without a GLUE task
// is titled by its tasks, and one with others besides says so.
function title() {
  const name = data.benchmark.display_name;
  if (data.benchmark.name !== "glue" || !data.tasks.length) return `${name} leaderboard`;
  const others = data.tasks.filter((t) => !t.glue);
  if (!others.length) return `${name} leaderboard`;
  if (others.length === data.tasks.length) {
    const names = others.slice(0, 3).map((t) => t.name).join(", ");
    return `Leaderboard: ${names}${others.length > 3 ? ` and ${others.length - 3} more` : ""}`;
  }
  return `${name} leaderboard and ${others.length} other task${others.length > 1 ? "s" : ""}`;
}

function render() {
  const groupBy = data.group_by;
  const heading = document.querySelector("main h1") || document.querySelector("h1");
  if (heading) heading.textContent = title();
  document.title = `${title()} · ptmlab`;
  const empty = document.getElementById("lb-empty");
  empty.replaceChildren(...(data.benchmark.name === "glue" ? ["No fine-tune or multi-task result yet."]
    : [`No ${data.benchmark.display_name} result yet: fine-tunes of other tasks (classification ones among them) are on the `,
      el("a", { href: "/leaderboard" }, "GLUE board"), ", which shows every task."]));
  table.querySelector("thead").replaceChildren(el("tr", {},
    el("th", { title: "tick two rows to compare them over seeds" }, "A/B"),
    groupBy.map((k) => header(k, `config:${k}`)),
    data.tasks.map((t) => header(t.name, `task:${t.task}`, t.metric_labels.join("/"))),
    averaged() ? header(`${data.benchmark.display_name} avg`, "glue", "tasks") : "",
    FOOTPRINT.map(([name, column, sub]) => header(name, column, sub))));
  const rows = sortedRows();
  table.querySelector("tbody").replaceChildren(...rows.map((row) => el("tr", { "data-config": label(row) },
    el("td", {}, el("input", { type: "checkbox", class: "pick", checked: picked.includes(label(row)) || null,
      onchange: (e) => pick(row, e.target.checked) }),
      picked.indexOf(label(row)) >= 0 ? el("span", { class: "small" }, " " + "AB"[picked.indexOf(label(row))]) : ""),
    groupBy.map((k, i) => el("td", {}, row.config[k], i === groupBy.length - 1 && Object.keys(row.distinct || {}).length
      ? el("div", { class: "small distinct" }, Object.entries(row.distinct).map(([dk, dv]) => `${dk}=${dv}`).join(" · ")) : "")),
    data.tasks.map((t) => cell(row, t)),
    averaged() ? el("td", { class: "num glue", "data-glue": row.average ?? "" },
      row.average === null ? "–" : fmt(row.average), el("span", { class: "n" }, ` (${row.average_tasks})`)) : "",
    footprintCells(row))));
  document.getElementById("lb-empty").hidden = rows.length > 0;
  const flags = rows.flatMap((r) => r.flags.map((f) => `${Object.values(r.config).join(" / ")}: ${f}`));
  document.getElementById("lb-flags").replaceChildren(...(flags.length
    ? [el("h2", {}, "Flagged cells (degenerate runs, several configs under one seed)"), el("ul", { class: "small" }, flags.slice(0, 100).map((f) => el("li", {}, f)))] : []));
}

const loads = requestCounter();

async function load() {
  const request = loads.next();
  const params = filterParams();
  setQuery(Object.fromEntries(["sweep_id", "tag", "group_by", "adaptation", "benchmark", "pool"].map((k) => [k, params.get(k) || ""])));
  for (const [id, fmtName] of [["export-csv", "csv"], ["export-latex", "latex"]]) {
    const p = new URLSearchParams(params);
    p.set("format", fmtName);
    document.getElementById(id).href = `/api/v1/views/leaderboard?${p}`;
  }
  let answer;
  try {
    answer = await api(`/api/v1/views/leaderboard?${params}`);
  } catch (err) {
    if (!loads.stale(request)) flash(`leaderboard: ${err.message}`);
    return;
  }
  if (loads.stale(request)) return;
  data = answer;
  flash("");
  setOptions(form.elements.sweep_id, data.options.sweeps, params.get("sweep_id") || "", "all");
  const tagValues = Object.entries(data.options.tags).flatMap(([k, vs]) => vs.map((v) => `${k}=${v}`));
  setOptions(form.elements.tag, tagValues, params.get("tag") || "", "any");
  modeBoxes(data.options.adaptations || []);
  const bench = form.elements.benchmark;
  bench.replaceChildren(...data.options.benchmarks.map((b) => el("option", { value: b.name }, b.display_name)));
  bench.value = data.benchmark.name;
  // The order nobody chose (no sort in the URL) is worked out again for each board: another
  // benchmark may have the average the last one lacked.
  let chosen = Boolean(query().get("sort"));
  if (!chosen) sort = { column: "glue", desc: true };
  const known = sort.column === "glue" || sort.column.startsWith("config:") || FOOTPRINT.some(([, c]) => c === sort.column);
  if (!known && !data.tasks.some((t) => `task:${t.task}` === sort.column)) {
    // a task column the board no longer has (another benchmark): back to the default order
    sort = { column: "glue", desc: true };
    chosen = false;
  }
  // No row has the benchmark's average (a board of single tasks): by default sort by the task most
  // rows have, not by a column that reads "– (0)" everywhere.
  if (sort.column === "glue" && !chosen && data.tasks.length
      && data.rows.every((r) => r.average === null || r.average === undefined)) {
    const filled = (t) => data.rows.filter((r) => r.cells[t.task]?.mean != null).length;
    sort = { column: `task:${[...data.tasks].sort((a, b) => filled(b) - filled(a))[0].task}`, desc: true };
  }
  render();
  keyOptions();
}

// Rows-by keys offered as you type, after the keys already chosen: every text key and every config
// key a stored fine-tune has.
let keys = null;
async function keyOptions() {
  if (!keys) {
    try {
      const runs = await api("/api/v1/views/runs?limit=1&kind=finetune");
      keys = runs.available.filter((a) => !a.numeric || a.source === "config");
    } catch {
      return;
    }
  }
  const typed = form.elements.group_by.value;
  const before = typed.includes(",") ? typed.slice(0, typed.lastIndexOf(",") + 1) : "";
  const chosen = new Set(before.split(",").map((k) => k.trim()));
  document.getElementById("lb-keys").replaceChildren(...keys.filter((a) => !chosen.has(a.key))
    .map((a) => el("option", { value: `${before}${a.key}` }, `${a.source === "config" ? "config key" : a.source}: ${a.count} runs`)));
}
form.elements.group_by.addEventListener("input", keyOptions);

form.elements.pool.checked = query().get("pool") === "true";
form.elements.pool.addEventListener("change", () => { picked = []; load(); });

for (const name of ["sweep_id", "tag", "group_by", "benchmark"]) {
  const value = query().get(name);
  if (value) {
    if (form.elements[name].tagName === "SELECT") form.elements[name].append(el("option", { value }, value));
    form.elements[name].value = value;
  }
  form.elements[name].addEventListener("change", load);
}
load();
