// The jobs table: filterable (kept in the URL), paginated, refreshed every 2 s.
import { api, badge, duration, el, flash, poll, progressBar, query, setQuery, shortTime } from "/static/js/api.js";

const PAGE = 50;
const FILTERS = ["status", "stage", "queue", "sweep_id", "pipeline_id"];
const form = document.getElementById("job-filters");
const body = document.querySelector("#jobs-table tbody");
let offset = Number(query().get("offset") || 0);

for (const name of FILTERS) {
  if (query().get(name)) form.elements[name].value = query().get(name);
  form.elements[name].addEventListener("change", () => { offset = 0; refresh(); });
}

// Overrides that say what the job is (group choices and the keys it sets), shortest first.
function keyOverrides(job) {
  const items = (job.overrides || []).filter((o) => !o.startsWith("trainer.enable_progress_bar"));
  if (job.seed !== undefined) items.push(`seed=${job.seed}`);
  return items.slice(0, 8).map((o) => el("code", { class: "chip" }, o));
}

async function act(job, action) {
  try {
    await api(`/api/v1/jobs/${job.id}/${action}`, { method: "POST" });
    flash("");
  } catch (err) {
    flash(`${action} job ${job.id}: ${err.message}`);
  }
  refresh();
}

function row(job) {
  const actions = [];
  if (job.status === "queued" || job.status === "running") {
    actions.push(el("button", { type: "button", class: "small danger", onclick: () => act(job, "cancel") },
      job.cancel_requested ? "cancelling…" : "cancel"));
  }
  if (job.status === "failed" || job.status === "cancelled") {
    actions.push(el("button", { type: "button", class: "small", onclick: () => act(job, "retry") }, "retry"));
  }
  return el("tr", { "data-job-id": job.id, "data-status": job.status },
    el("td", {}, el("a", { href: `/jobs/${job.id}` }, job.id)),
    el("td", {}, job.name || "", Object.entries(job.tags || {})
      .map(([k, v]) => el("code", { class: "chip small", title: "tag" }, `${k}=${v}`))),
    el("td", {}, badge(job.status)),
    el("td", { class: "progress" }, progressBar(job.progress, job.status)),
    el("td", {}, job.stage),
    el("td", { class: "overrides" }, keyOverrides(job)),
    el("td", {}, job.queue + (job.priority ? ` (p${job.priority})` : "") + (job.gpus ? ` · ${job.gpus} GPU` : "")),
    el("td", { class: "mono small" }, job.worker_id || ""),
    el("td", {}, `${job.attempts}/${job.max_attempts}`),
    el("td", {}, duration(job.started_at, job.finished_at)),
    el("td", {}, shortTime(job.created_at)),
    el("td", {}, actions),
  );
}

async function refresh() {
  const params = new URLSearchParams({ limit: PAGE, offset });
  const state = { offset: offset || "" };
  for (const name of FILTERS) {
    const value = form.elements[name].value.trim();
    state[name] = value;
    if (value) params.set(name === "queue" ? "queue" : name, value);
  }
  setQuery(state);
  let page;
  try {
    page = await api(`/api/v1/jobs?${params}`);
  } catch (err) {
    flash(`jobs: ${err.message}`);
    return;
  }
  body.replaceChildren(...page.jobs.map(row));
  document.getElementById("jobs-empty").hidden = page.jobs.length > 0;
  const last = Math.min(page.total, offset + page.jobs.length);
  document.getElementById("page-info").textContent = page.total ? `${offset + 1}–${last} of ${page.total}` : "";
  document.getElementById("prev").disabled = offset === 0;
  document.getElementById("next").disabled = last >= page.total;
}

document.getElementById("prev").addEventListener("click", () => { offset = Math.max(0, offset - PAGE); refresh(); });
document.getElementById("next").addEventListener("click", () => { offset += PAGE; refresh(); });
refresh();
poll(refresh, 2000);
