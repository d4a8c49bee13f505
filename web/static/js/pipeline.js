// A pipeline as its DAG: one box per job in columns by depth (longest path from a root), edges
// parent -> child, box colours = live job statuses (polled), each box a link to its job.
import { api, flash, poll } from "/static/js/api.js";

const pipelineId = document.getElementById("pipeline").dataset.pipelineId;
const svg = document.getElementById("dag");
const NS = "http://www.w3.org/2000/svg";
const BOX = { w: 210, h: 48, gapX: 70, gapY: 18, pad: 12 };

function node(tag, attrs, ...children) {
  const n = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
  n.append(...children);
  return n;
}

function layout(jobs) {
  const byName = new Map(jobs.map((j) => [j.name, j]));
  const depth = new Map();
  const visit = (j, seen = new Set()) => {
    if (depth.has(j.name)) return depth.get(j.name);
    if (seen.has(j.name)) return 0;  // a cycle cannot be queued; stay safe anyway
    seen.add(j.name);
    const parents = j.depends_on.map((p) => byName.get(p)).filter(Boolean);
    const d = parents.length ? 1 + Math.max(...parents.map((p) => visit(p, seen))) : 0;
    depth.set(j.name, d);
    return d;
  };
  jobs.forEach((j) => visit(j));
  const columns = [];
  for (const j of jobs) (columns[depth.get(j.name)] ||= []).push(j);
  const pos = new Map();
  columns.forEach((col, c) => col.forEach((j, r) => pos.set(j.name, {
    x: BOX.pad + c * (BOX.w + BOX.gapX), y: BOX.pad + r * (BOX.h + BOX.gapY) })));
  const rows = Math.max(...columns.map((c) => c.length));
  return { pos, width: 2 * BOX.pad + columns.length * BOX.w + (columns.length - 1) * BOX.gapX,
    height: 2 * BOX.pad + rows * BOX.h + (rows - 1) * BOX.gapY };
}

function draw(pipeline) {
  const jobs = pipeline.jobs;
  const { pos, width, height } = layout(jobs);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  const edges = jobs.flatMap((j) => j.depends_on.filter((p) => pos.has(p)).map((p) => {
    const a = pos.get(p), b = pos.get(j.name);
    const x1 = a.x + BOX.w, y1 = a.y + BOX.h / 2, x2 = b.x, y2 = b.y + BOX.h / 2, mid = (x1 + x2) / 2;
    return node("path", { class: "dag-edge", d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2 - 4},${y2}`,
      "marker-end": "url(#arrow)", "data-from": p, "data-to": j.name });
  }));
  const boxes = jobs.map((j) => {
    const { x, y } = pos.get(j.name);
    const p = j.progress;
    const step = p && p.total_steps && j.status === "running" ? ` · ${p.step}/${p.total_steps}` : "";
    return node("a", { href: `/jobs/${j.job_id}`, class: "dag-node", "data-job-id": j.job_id, "data-name": j.name,
      "data-status": j.status },
      node("rect", { x, y, width: BOX.w, height: BOX.h, rx: 6, class: `dag-box state-${j.status}` }),
      node("text", { x: x + 10, y: y + 19, class: "dag-name" }, `${j.name}`.slice(0, 28)),
      node("text", { x: x + 10, y: y + 37, class: "dag-meta" }, `job ${j.job_id} · ${j.stage} · ${j.status}${step}`));
  });
  const defs = node("defs", {}, node("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
    markerHeight: 7, orient: "auto-start-reverse" }, node("path", { d: "M0,0 L10,5 L0,10 z", class: "dag-arrow" })));
  svg.replaceChildren(defs, ...edges, ...boxes);
  const counts = {};
  for (const j of jobs) counts[j.status] = (counts[j.status] || 0) + 1;
  document.getElementById("pipeline-counts").textContent =
    `${jobs.length} jobs: ` + Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(", ");
}

async function refresh() {
  try {
    draw(await api(`/api/v1/pipelines/${pipelineId}`));
  } catch (err) {
    flash(`pipeline: ${err.message}`);
  }
  return true;
}

refresh();
poll(refresh, 2000);
