// The submit form, built from /api/v1/catalogue: a stage shows the config groups it reads.
// Errors from the server's validation are shown next to the field they name.
import { api, el } from "/static/js/api.js";

const form = document.getElementById("submit-form");
const stageSelect = document.getElementById("f-stage");
const groupBox = document.getElementById("group-fields");
const sweepBox = document.getElementById("f-sweep");
const preview = document.getElementById("sweep-preview");
let catalogue = null;
let previewTimer = null;
let previewSeq = 0;

const NONE = "";  // "(none)" / "(default)" choice: no override for this group

function groupField(group) {
  const options = catalogue.groups[group] || [];
  const dflt = catalogue.defaults[group];
  const select = el("select", { id: `f-group-${group}`, name: group, "data-group": group },
    el("option", { value: NONE }, dflt ? `(default: ${dflt})` : "(none)"),
    options.map((o) => el("option", { value: o }, o)));
  select.multiple = sweepBox.checked;
  if (sweepBox.checked) select.size = Math.min(6, options.length + 1);
  return el("div", { class: "field", "data-field": group },
    el("label", { for: `f-group-${group}` }, group), select, el("div", { class: "field-error", role: "alert" }));
}

function renderGroups() {
  const stage = stageSelect.value;
  const previous = Object.fromEntries([...groupBox.querySelectorAll("select")].map((s) =>
    [s.name, [...s.selectedOptions].map((o) => o.value)]));
  const groups = catalogue.stages[stage] || [];
  groupBox.replaceChildren(...(groups.length ? groups.map(groupField)
    : [el("p", { class: "empty" }, `stage ${stage} reads no config group: set what it needs in the overrides.`)]));
  for (const select of groupBox.querySelectorAll("select")) {
    for (const option of select.options) option.selected = (previous[select.name] || [NONE]).includes(option.value);
    if (![...select.options].some((o) => o.selected)) select.options[0].selected = true;
  }
}

function lines(text) {
  return text.split("\n").map((l) => l.trim()).filter(Boolean);
}

// The overrides of the form (group choices that differ from the default, then the extra lines).
function overrides() {
  const out = [];
  for (const select of groupBox.querySelectorAll("select")) {
    const chosen = [...select.selectedOptions].map((o) => o.value).filter((v) => v !== NONE);
    if (chosen.length) out.push(`${select.name}=${chosen.join(",")}`);
  }
  // the training fields, where filled: the keys a researcher sets most often
  const fields = [["backbone", "backbone"], ["stage.lr", "lr"], ["stage.epochs", "epochs"], ["stage.batch_size", "batch_size"]];
  for (const [key, name] of fields) {
    const value = form.elements[name].value.trim();
    if (value) out.push(`${key}=${value}`);
  }
  return [...out, ...lines(form.elements.overrides.value)];
}

function tags() {
  const out = {};
  for (const part of form.elements.tags.value.split(",").map((p) => p.trim()).filter(Boolean)) {
    const [key, ...rest] = part.split("=");
    out[key.trim()] = rest.join("=").trim();
  }
  return out;
}

// The seed field: one seed, or a comma list that makes the submission a sweep over seeds.
function seeds() {
  return form.elements.seed.value.split(",").map((s) => s.trim()).filter(Boolean);
}

function body(dryRun) {
  const b = {
    overrides: overrides(), queue: form.elements.queue.value.trim() || "default",
    priority: Number(form.elements.priority.value || 0), gpus: Number(form.elements.gpus.value || 0), tags: tags(),
  };
  if (sweepBox.checked) {
    b.overrides = [`stage=${stageSelect.value}`, ...b.overrides];
    if (seeds().length && !b.overrides.some((o) => o.startsWith("seed="))) b.overrides.push(`seed=${seeds().join(",")}`);
    const name = form.elements.name.value.trim() || form.elements.job_name.value.trim();
    if (name) b.name = name;
    b.dry_run = dryRun;
  } else {
    b.stage = stageSelect.value;
    if (form.elements.seed.value !== "") b.seed = Number(form.elements.seed.value);
    if (form.elements.job_name.value.trim()) b.name = form.elements.job_name.value.trim();
  }
  return b;
}

function clearErrors() {
  for (const box of form.querySelectorAll(".field-error")) box.textContent = "";
  for (const field of form.querySelectorAll(".field.invalid")) field.classList.remove("invalid");
}

// Which field an error message is about: the earliest mention of a field's key wins
// ("Could not find 'model/nope'", "objective=clm does not work with ...", "queue: String should ...").
function fieldFor(message) {
  const keys = [...form.querySelectorAll(".field[data-field]")].map((f) => f.dataset.field)
    .filter((k) => k !== "overrides");
  // "stage=finetune needs a task": the field to fill is the one missing, not the stage
  const missing = /needs an? ([\w.]+)/.exec(message);
  if (missing && keys.includes(missing[1])) return missing[1];
  let best = null;
  for (const key of keys) {
    const re = new RegExp(`(^|[\\s'"\`\\[(])\\+?${key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?=[/=:'"\`.\\s]|$)`);
    const m = re.exec(message);
    if (m && (best === null || m.index < best.index)) best = { key, index: m.index };
  }
  if (best && best.key === "seed" && lines(form.elements.overrides.value).some((l) => l.startsWith("seed="))) return "overrides";
  if (best) {
    // A key set in the extra overrides (e.g. trainer.x) belongs to that box, not to a group field.
    const extra = lines(form.elements.overrides.value).some((l) => l.replace(/^[+~]/, "").startsWith(`${best.key}.`) || l.startsWith(`${best.key}=`));
    if (extra && !groupBox.querySelector(`[data-group="${best.key}"]`)?.value) return "overrides";
    return best.key;
  }
  const extras = lines(form.elements.overrides.value).map((l) => l.split("=")[0].replace(/^[+~]/, ""));
  if (/^overrides/.test(message) || extras.some((k) => k && message.includes(k))) return "overrides";
  return null;
}

function showError(err) {
  const key = fieldFor(err.message);
  const field = key && form.querySelector(`.field[data-field="${key}"]`);
  const box = field ? field.querySelector(".field-error") : document.getElementById("form-error");
  if (field) field.classList.add("invalid");
  box.textContent = err.message;
}

async function updatePreview() {
  if (!sweepBox.checked) { preview.textContent = ""; return; }
  const seq = ++previewSeq;
  preview.textContent = "counting…";
  try {
    const plan = await api("/api/v1/sweeps", { method: "POST", body: body(true) });
    if (seq !== previewSeq) return;
    clearErrors();
    preview.replaceChildren(el("b", { id: "sweep-count" }, `${plan.count} job${plan.count === 1 ? "" : "s"}`),
      " would be queued", el("ul", { class: "mono small" },
        plan.jobs.slice(0, 5).map((j) => el("li", {}, j.join(" "))), plan.count > 5 ? el("li", {}, "…") : null));
    document.getElementById("submit-button").textContent = `Submit sweep (${plan.count} jobs)`;
  } catch (err) {
    if (seq !== previewSeq) return;
    clearErrors();
    preview.textContent = "";
    showError(err);
  }
}

// The recipe the job would train with (conf/recipe/, ptmlab.recipes): each value and where it comes
// from; the training fields' placeholders show the values that apply when they are left empty.
const TRAINING_FIELDS = { "stage.lr": "lr", "stage.epochs": "epochs", "stage.batch_size": "batch_size" };
let recipeSeq = 0;

async function updateRecipe() {
  const box = document.getElementById("recipe-preview");
  const seq = ++recipeSeq;
  if (sweepBox.checked || stageSelect.value !== "finetune") { box.textContent = ""; return; }
  try {
    const recipe = await api("/api/v1/jobs/recipe", { method: "POST", body: body(false) });
    if (seq !== recipeSeq) return;
    const entries = Object.entries(recipe.values);
    for (const [key, name] of Object.entries(TRAINING_FIELDS)) {
      form.elements[name].placeholder = key in recipe.values ? String(recipe.values[key].value) : "";
    }
    box.replaceChildren(el("b", {}, "recipe "), el("span", { id: "recipe-name" }, recipe.name),
      entries.length ? ": " : " (the stage's defaults)",
      ...entries.map(([key, v], i) => el("span", { class: "recipe-value", "data-key": key },
        i ? " · " : "", el("code", {}, `${key}=${JSON.stringify(v.value)}`), ` (${v.origin})`)));
  } catch {
    if (seq === recipeSeq) box.textContent = "";  // the submission itself names what does not compose
  }
}

function schedulePreview() {
  clearTimeout(previewTimer);
  previewTimer = setTimeout(() => { updatePreview(); updateRecipe(); }, 400);
}

async function submit(event) {
  event.preventDefault();
  clearErrors();
  const result = document.getElementById("submit-result");
  if (seeds().some((s) => !/^\d+$/.test(s))) {
    showError(new Error(`seed: ${JSON.stringify(form.elements.seed.value)} is not a whole number or a comma list of them`));
    return;
  }
  if (seeds().length > 1 && !sweepBox.checked) {  // several seeds: a sweep
    sweepBox.checked = true;
    renderGroups();
  }
  clearTimeout(previewTimer);  // the submission itself says what is wrong or queued
  previewSeq += 1;
  result.textContent = "validating…";
  const button = document.getElementById("submit-button");
  button.disabled = true;
  try {
    if (sweepBox.checked) {
      const sweep = await api("/api/v1/sweeps", { method: "POST", body: body(false) });
      result.replaceChildren(`queued sweep ${sweep.id} with ${sweep.count} jobs: `,
        el("a", { href: `/jobs?sweep_id=${sweep.id}` }, "see them"));
    } else {
      const job = await api("/api/v1/jobs", { method: "POST", body: body(false) });
      result.replaceChildren("queued ", el("a", { href: `/jobs/${job.id}`, id: "submitted-job" }, `job ${job.id}`));
    }
  } catch (err) {
    result.textContent = "";
    showError(err);
  } finally {
    button.disabled = false;
  }
}

function onSweepToggle() {
  document.getElementById("submit-button").textContent = sweepBox.checked ? "Submit sweep" : "Submit job";
  renderGroups();
  schedulePreview();
}

// The backbones a fine-tune can start from: succeeded pretrain jobs (`job:<id>`), and `random`.
async function backboneOptions() {
  try {
    const jobs = await api("/api/v1/jobs?stage=pretrain&status=succeeded&limit=50");
    document.getElementById("backbone-options").replaceChildren(el("option", { value: "random" }, "from scratch"),
      ...(jobs.items || []).map((j) => el("option", { value: `job:${j.id}` }, `pretrain job ${j.id}${j.name ? ` ${j.name}` : ""}`)));
  } catch {
    // the list is a convenience: the field takes any reference typed in
  }
}

// "Clone" on a job's page: the form pre-filled with that job's stage, overrides, seed, name and tags.
async function fillFrom(jobId) {
  const job = await api(`/api/v1/jobs/${encodeURIComponent(jobId)}`);
  if ([...stageSelect.options].some((o) => o.value === job.stage)) stageSelect.value = job.stage;
  renderGroups();
  form.elements.overrides.value = (job.overrides || []).join("\n");
  form.elements.seed.value = job.seed ?? "";
  form.elements.job_name.value = job.name ? `${job.name}-clone` : "";
  form.elements.tags.value = Object.entries(job.tags || {}).map(([k, v]) => `${k}=${v}`).join(", ");
  document.getElementById("submit-result").textContent = `cloned from job ${job.id}: change what you want, then submit`;
}

async function init() {
  catalogue = await api("/api/v1/catalogue");
  const stages = catalogue.groups.stage || Object.keys(catalogue.stages);
  stageSelect.replaceChildren(...stages.map((s) => el("option", { value: s }, s)));
  const wanted = new URLSearchParams(window.location.search).get("stage");
  stageSelect.value = stages.includes(wanted) ? wanted : catalogue.defaults.stage || stages[0];
  renderGroups();
  backboneOptions();
  const clone = new URLSearchParams(window.location.search).get("clone");
  if (clone) await fillFrom(clone);
  schedulePreview();
  stageSelect.addEventListener("change", () => { renderGroups(); schedulePreview(); });
  sweepBox.addEventListener("change", onSweepToggle);
  form.addEventListener("input", schedulePreview);
  form.addEventListener("change", schedulePreview);
  form.addEventListener("submit", submit);
}

init().catch((err) => { document.getElementById("form-error").textContent = `catalogue: ${err.message}`; });
