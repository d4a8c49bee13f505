// The runs table: every result one row; columns are any summary keys (chosen, kept in the URL),
// sorted by a header click, filtered (`column op value`, ';'-separated) and searched server-side
// (/api/v1/views/runs); ticked rows open side by side on the compare page.
import { api, el, flash, query, setQuery } from "/static/js/api.js";

const PAGE = 50;
const form = document.getElementById("runs-controls");
const table = document.getElementById("runs-table");
const selected = new Set();
const state = {
  kind: query().get("kind") || "", q: query().get("q") || "", filter: query().get("filter") || "",
  columns: (query().get("columns") || "").split(",").filter(Boolean), sort: query().get("sort") || "id",
  order: query().get("order") || "desc", offset: Number(query().get("offset") || 0),
};
let last = null;

function keep() {
  setQuery({ kind: state.kind, q: state.q, filter: state.filter, columns: state.columns.join(","),
    sort: state.sort === "id" ? "" : state.sort, order: state.order === "desc" ? "" : state.order, offset: state.offset || "" });
}

function cell(value) {
  if (value === null || value === undefined) return el("td", { class: "empty-cell" }, "–");
  if (typeof value === "number") {
    const text = Number.isInteger(value) ? value.toLocaleString("en") : value.toPrecision(4);
    return el("td", { class: "num", "data-value": value }, text);
  }
  return el("td", { title: String(value), "data-value": String(value) }, String(value));
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
  table.querySelector("thead").replaceChildren(el("tr", {}, el("th", {}, ""), header("id", "result", false),
    el("th", {}, "job"), ...columns.map((c) => header(c, c, true))));
  table.querySelector("tbody").replaceChildren(...data.rows.map((r) => el("tr", { "data-id": r.id },
    el("td", {}, el("input", { type: "checkbox", class: "pick", "aria-label": `select result ${r.id}`,
      ...(selected.has(r.id) ? { checked: "" } : {}),
      onchange: (event) => { event.target.checked ? selected.add(r.id) : selected.delete(r.id); updateCompare(); } })),
    el("td", {}, el("a", { href: `/runs/${r.id}` }, `#${r.id}`)),
    el("td", {}, r.job_id ? el("a", { href: `/jobs/${r.job_id}` }, r.job_name || `job ${r.job_id}`) : "–"),
    ...columns.map((c) => cell(r.values[c])))));
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
    .filter((a) => !columns.includes(a.key)).map((a) => el("option", { value: a.key }, `${a.count} rows${a.numeric ? ", numeric" : ""}`)));
}

function updateCompare() {
  const button = document.getElementById("compare-selected");
  button.disabled = selected.size < 2;
  button.textContent = selected.size ? `Compare selected (${selected.size})` : "Compare selected";
}

async function refresh() {
  keep();
  const params = new URLSearchParams({ limit: PAGE, offset: state.offset, sort: state.sort, order: state.order });
  if (state.kind) params.set("kind", state.kind);
  if (state.q) params.set("q", state.q);
  for (const f of state.filter.split(";").map((x) => x.trim()).filter(Boolean)) params.append("filter", f);
  for (const c of state.columns) params.append("column", c);
  try {
    last = await api(`/api/v1/views/runs?${params}`);
    flash("");
  } catch (err) {
    flash(`runs: ${err.message}`);
    return;
  }
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
  if (!last.available.some((a) => a.key === key)) { flash(`no result has a column ${key}`); return; }
  state.columns = [...last.columns.filter((c) => c !== key), key];
  refresh();
});
document.getElementById("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE); refresh(); });
document.getElementById("next").addEventListener("click", () => { state.offset += PAGE; refresh(); });
document.getElementById("compare-selected").addEventListener("click", () => {
  window.location.href = `/compare?runs=${[...selected].sort((a, b) => a - b).join(",")}`;
});
refresh();
