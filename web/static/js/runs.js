// The runs table: every result one row; columns are any summary keys (chosen, kept in the URL),
// sorted by a header click, filtered (`column op value`, ';'-separated) and searched server-side
// (/api/v1/views/runs); config keys (`stage.lr`) are columns like any other; `group by` shows one
// row per value with mean ± std over its runs; ticked rows open side by side on the compare page.
// A run is named by its job everywhere.
import { api, columnFormat, el, flash, fmtScore, query, requestCounter, setQuery } from "/static/js/api.js";

const PAGE = 50;
const form = document.getElementById("runs-controls");
const table = document.getElementById("runs-table");
const selected = new Set();
const state = {
  kind: query().get("kind") || "", q: query().get("q") || "", filter: query().get("filter") || "",
  columns: (query().get("columns") || "").split(",").filter(Boolean), sort: query().get("sort") || "id",
  order: query().get("order") || "desc", offset: Number(query().get("offset") || 0),
  group: query().get("group_by") || "",
};
let last = null;

function keep() {
  setQuery({ kind: state.kind, q: state.q, filter: state.filter, columns: state.columns.join(","),
    sort: state.sort === "id" ? "" : state.sort, order: state.order === "desc" ? "" : state.order, offset: state.offset || "",
    group_by: state.group });
}

// How a column's numbers read, the same for every row: a config key as configured (0.0001, 3),
// every other column by api.js columnFormat (fixed decimals where any is a fraction, units for sizes).
function formatter(column, values) {
  const source = last?.available.find((a) => a.key === column)?.source;
  return source === "config" ? (v) => String(v) : columnFormat(column, values);
}

function cell(value, format = String, column = undefined) {
  if (value === null || value === undefined) return el("td", { class: "empty-cell", "data-column": column }, "–");
  if (typeof value === "number") return el("td", { class: "num", "data-value": value, "data-column": column }, format(value));
  return el("td", { title: String(value), "data-value": String(value), "data-column": column }, String(value));
}

function header(column, label, removable) {
  const active = state.sort === column;
  return el("th", {
    class: "sortable" + (active ? " sorted" : ""), "data-column": column,
    "aria-sort": active ? (state.order === "desc" ? "descending" : "ascending") : "none",
    onclick: () => {
      state.order = active && state.order === "desc" ? "asc" : "desc";
      state.sort = column;
      state.offset = 0;
      refresh();
    },
  }, label, active ? (state.order === "desc" ? " ▼" : " ▲") : "",
  removable ? el("button", { type: "button", class: "remove", title: `remove column ${column}`, onclick: (event) => {
    event.stopPropagation();
    state.columns = last.columns.filter((c) => c !== column);
    if (state.sort === column) state.sort = "id";
    refresh();
  } }, "×") : "");
}

function render(data) {
  const columns = data.columns;
  table.querySelector("thead").replaceChildren(el("tr", {}, el("th", {}, ""), header("id", "run", false),
    ...columns.map((c) => header(c, c, true))));
  // a run is picked by its job (`j14`), a result recorded by hand without a job by its id (`r3`)
  const formats = Object.fromEntries(columns.map((c) => [c, formatter(c, data.rows.map((r) => r.values[c]))]));
  table.querySelector("tbody").replaceChildren(...data.rows.map((r) => el("tr", { "data-id": pickId(r),
    class: r.degenerate ? "degenerate" : undefined,
    title: r.degenerate ? `at or below the majority-class baseline (${r.degenerate.metric} ${fmtScore(r.degenerate.baseline)})` : undefined },
    el("td", {}, el("input", { type: "checkbox", class: "pick", "aria-label": `select run ${r.label}`,
      ...(selected.has(pickId(r)) ? { checked: "" } : {}),
      onchange: (event) => { event.target.checked ? selected.add(pickId(r)) : selected.delete(pickId(r)); updateCompare(); } })),
    el("td", {}, r.job_id ? el("a", { href: `/jobs/${r.job_id}` }, r.label) : el("a", { href: `/runs/${r.result_id}` }, r.label)),
    ...columns.map((c) => cell(r.values[c], formats[c], c)))));
  renderGroups(data);
  document.getElementById("runs-empty").hidden = data.rows.length > 0;
  document.getElementById("runs-info").textContent =
    `${data.total.toLocaleString("en")} of ${data.all.toLocaleString("en")} results match` + (selected.size ? ` · ${selected.size} selected` : "");
  document.getElementById("page-info").textContent = data.total
    ? `${data.offset + 1}–${Math.min(data.offset + PAGE, data.total)} of ${data.total.toLocaleString("en")}` : "";
  document.getElementById("prev").disabled = data.offset === 0;
  document.getElementById("next").disabled = data.offset + PAGE >= data.total;
  const kinds = form.elements.kind;
  if (kinds.options.length === 1) {
    for (const [kind, n] of Object.entries(data.kinds)) kinds.append(el("option", { value: kind }, `${kind} (${n})`));
    kinds.value = state.kind;
  }
  document.getElementById("column-keys").replaceChildren(...data.available
    .filter((a) => !columns.includes(a.key)).map((a) => el("option", { value: a.key }, keyNote(a))));
  groupKeys();
}

function keyNote(a) {
  return `${a.source === "config" ? "config key" : a.source}: ${a.count} runs${a.numeric ? ", numeric" : ""}`;
}

// Group-by keys offered as you type, after the keys already chosen (`model,stage.lr`).
function groupKeys() {
  if (!last) return;
  const typed = form.elements.group.value;
  const before = typed.includes(",") ? typed.slice(0, typed.lastIndexOf(",") + 1) : "";
  const chosen = new Set(before.split(",").map((k) => k.trim()));
  document.getElementById("group-keys").replaceChildren(...last.available.filter((a) => !chosen.has(a.key))
    .map((a) => el("option", { value: `${before}${a.key}` }, keyNote(a))));
}

function statText(stat, format) {
  if (!stat) return "–";
  if (stat.mean !== undefined) {
    if (stat.mean === null) return "–";
    return stat.std === null ? format(stat.mean) : `${format(stat.mean)} ± ${format(stat.std)}`;
  }
  return stat.value ?? `${stat.values.length} values`;
}

// One row per value of the group keys: each column's mean ± std (sample std over the group's runs),
// n, min–max on hover, the members one click away; a group whose runs differ in more than their
// seed names the keys, and its ± is over runs, not seeds.
function renderGroups(data) {
  const box = document.getElementById("groups-box");
  box.hidden = !data.groups;
  if (!data.groups) return;
  const keys = data.group_by;
  const columns = data.columns.filter((c) => !keys.includes(c));
  document.getElementById("groups-info").textContent =
    `${data.group_total} groups by ${keys.join(", ")} · mean ± std over each group's runs (n runs)`;
  const gtable = document.getElementById("groups-table");
  gtable.querySelector("thead").replaceChildren(el("tr", {}, ...keys.map((k) => el("th", {}, k)), el("th", {}, "n"),
    ...columns.map((c) => el("th", {}, c)), el("th", {}, "spread"), el("th", {}, "runs")));
  const formats = Object.fromEntries(columns.map((c) => [c, formatter(c, data.groups.flatMap((g) => [g.values[c]?.min, g.values[c]?.max]))]));
  gtable.querySelector("tbody").replaceChildren(...data.groups.map((g) => el("tr", { class: "group-row" },
    ...keys.map((k) => cell(g.key[k], formatter(k, [g.key[k]]))),
    el("td", { class: "num", "data-n": g.n }, String(g.n)),
    ...columns.map((c) => {
      const stat = g.values[c];
      const numeric = stat && stat.mean !== undefined;
      const range = numeric && stat.n > 1 && stat.min !== null
        ? el("div", { class: "small range" }, `${formats[c](stat.min)} – ${formats[c](stat.max)}`) : "";
      return el("td", { class: numeric ? "num" : "", title: numeric ? `min ${stat.min} · max ${stat.max} · n ${stat.n}` : "",
        "data-column": c, "data-mean": stat?.mean ?? "", "data-std": stat?.std ?? "" },
      statText(stat, formats[c]), range);
    }),
    el("td", { class: g.varying.length ? "mixed" : "", title: g.varying.length ? `differ: ${g.varying.join(", ")}` : "" },
      g.varying.length ? `over runs (${g.varying.join(", ")} differ)` : "over seeds",
      g.degenerate ? el("span", { class: "flagged", title: "at or below the task's majority-class baseline" },
        ` ⚠ ${g.degenerate} at or below the baseline${g.baseline != null ? ` ${fmtScore(g.baseline)}` : ""}`) : ""),
    el("td", { class: "small members" }, g.job_ids.flatMap((id, i) => id ? [el("a", { href: `/jobs/${id}` }, g.labels[i]), " "] : [g.labels[i] + " "]),
      (g.members_listed ?? g.n) < g.n ? `… ${g.n - g.members_listed} more` : ""))));
}

function pickId(r) {
  return r.job_id ? `j${r.job_id}` : `r${r.result_id}`;
}

function updateCompare() {
  const button = document.getElementById("compare-selected");
  button.disabled = selected.size < 2;
  button.textContent = selected.size ? `Compare selected (${selected.size})` : "Compare selected";
}

const requests = requestCounter();

async function refresh() {
  keep();
  const request = requests.next();
  const params = new URLSearchParams({ limit: PAGE, offset: state.offset, sort: state.sort, order: state.order });
  if (state.kind) params.set("kind", state.kind);
  if (state.q) params.set("q", state.q);
  for (const f of state.filter.split(";").map((x) => x.trim()).filter(Boolean)) params.append("filter", f);
  for (const c of state.columns) params.append("column", c);
  if (state.group) params.set("group_by", state.group);
  let answer;
  try {
    answer = await api(`/api/v1/views/runs?${params}`);
    if (requests.stale(request)) return;
    last = answer;
    flash("");
  } catch (err) {
    if (requests.stale(request)) return;
    flash(`runs: ${err.message}`);
    const info = document.getElementById("runs-info");
    info.textContent = `not shown: ${err.message}`;
    info.className = "small error";
    return;
  }
  document.getElementById("runs-info").className = "small";
  render(last);
}

form.elements.kind.addEventListener("change", () => { state.kind = form.elements.kind.value; state.offset = 0; refresh(); });
form.elements.q.value = state.q;
form.elements.q.addEventListener("input", () => { state.q = form.elements.q.value; state.offset = 0; refresh(); });
form.elements.filter.value = state.filter;
form.elements.filter.addEventListener("change", () => { state.filter = form.elements.filter.value; state.offset = 0; refresh(); });
form.elements.add.addEventListener("change", () => {
  const key = form.elements.add.value.trim();
  form.elements.add.value = "";
  if (!key || !last) return;
  if (!last.available.some((a) => a.key === key)) { flash(`column: '${key}' is a key of no run`); return; }
  state.columns = [...last.columns.filter((c) => c !== key), key];
  refresh();
});
form.elements.group.value = state.group;
form.elements.group.addEventListener("input", groupKeys);
form.elements.group.addEventListener("change", () => {
  state.group = form.elements.group.value.split(",").map((k) => k.trim()).filter(Boolean).join(",");
  state.offset = 0;
  refresh();
});
document.getElementById("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE); refresh(); });
document.getElementById("next").addEventListener("click", () => { state.offset += PAGE; refresh(); });
document.getElementById("compare-selected").addEventListener("click", () => {
  const of = (prefix) => [...selected].filter((s) => s.startsWith(prefix)).map((s) => Number(s.slice(1))).sort((a, b) => a - b);
  const p = [of("j").length ? `jobs=${of("j").join(",")}` : "", of("r").length ? `runs=${of("r").join(",")}` : ""];
  window.location.href = `/compare?${p.filter(Boolean).join("&")}`;
});
refresh();
