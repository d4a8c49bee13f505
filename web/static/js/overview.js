// The front page is rendered on the server; refresh it in place (often while jobs run).
import { poll } from "/static/js/api.js";

let quietTicks = 0;
poll(async () => {
  const live = document.getElementById("live");
  if (!live) return false;
  // Idle: look every 5th tick (~15 s) for work started elsewhere.
  if (live.dataset.live !== "on" && ++quietTicks % 5) return true;
  const html = await (await fetch(window.location.href, { headers: { Accept: "text/html" } })).text();
  const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
  if (fresh) live.replaceWith(fresh);
  return true;
}, 3000);
