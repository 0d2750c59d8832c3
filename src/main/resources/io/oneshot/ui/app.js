// oneshot console. Plain JavaScript on the DOM: every text goes in as a text node (h() below),
// never as HTML, so a log line or a tag holding "<script>" shows as text. The token lives in
// sessionStorage (gone with the tab), travels in the Authorization header only, never in a URL.

const TOKEN_KEY = "oneshot.token";
const view = document.getElementById("view");
let me = null; // GET /api/v1/whoami
let stopView = () => {}; // stops the current page's refresh loop and log stream

// ---- small helpers ---------------------------------------------------------------------------

/** An element: attributes (on* as listeners), then children (strings become text nodes). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  return el;
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || "HTTP " + status);
    this.status = status;
    this.body = body;
  }
}

/** A call to the API with the token; a 401 signs out. */
async function api(path, options = {}) {
  const headers = Object.assign({ Accept: "application/json" }, options.headers || {});
  headers.Authorization = "Bearer " + token();
  const res = await fetch(path, Object.assign({}, options, { headers }));
  if (res.status === 401) {
    signOut("Your token was refused (" + ((await res.json().catch(() => ({}))).error || "401") + "). Sign in again.");
    throw new ApiError(401, null);
  }
  const body = res.headers.get("Content-Type")?.includes("json") ? await res.json() : await res.text();
  if (!res.ok) throw new ApiError(res.status, body);
  return body;
}

function ms(n) {
  if (n === null || n === undefined) return "—";
  if (n < 1000) return n + " ms";
  const sec = n / 1000;
  if (sec < 60) return sec.toFixed(sec < 10 ? 1 : 0) + " s";
  const min = Math.floor(sec / 60);
  if (min < 60) return min + " min " + Math.round(sec % 60) + " s";
  const hrs = Math.floor(min / 60);
  if (hrs < 48) return hrs + " h " + (min % 60) + " min";
  return Math.floor(hrs / 24) + " d " + (hrs % 24) + " h";
}

function ago(iso) {
  if (!iso) return "—";
  return ms(Date.now() - Date.parse(iso)) + " ago";
}

/** Whether times show in UTC or this browser's zone: the header's switch, kept in this browser. */
function utcTimes() {
  return localStorage.getItem("oneshot.times") === "utc";
}

/**
 * A moment as the console and the CLI both print it, to the second: 2026-12-06 19:10:05 UTC, or
 * in this browser's zone with its offset (2026-12-06 20:10:05 +01:00).
 */
function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  const off = utcTimes() ? 0 : -d.getTimezoneOffset();
  const s = new Date(d.getTime() + off * 60000).toISOString().slice(0, 19).replace("T", " ");
  if (off === 0) return s + " UTC";
  const a = Math.abs(off);
  return s + " " + (off < 0 ? "-" : "+") + String(Math.floor(a / 60)).padStart(2, "0") + ":" + String(a % 60).padStart(2, "0");
}

/** The time of day of when(): a log line's and a timeline step's. */
function clock(iso) {
  return iso ? when(iso).slice(11, 19) : "";
}

function between(a, b) {
  if (!a) return null;
  return (b ? Date.parse(b) : Date.now()) - Date.parse(a);
}

function statusBadge(status) {
  return h("span", { class: "status " + status, "data-status": status }, status);
}

function chips(tags) {
  const entries = Object.entries(tags || {});
  if (entries.length === 0) return h("span", { class: "muted" }, "untagged");
  return h("span", { class: "chips" }, entries.map(([k, v]) => h("span", { class: "chip" }, k + "=" + v)));
}

function notice(text) {
  return h("div", { class: "notice", role: "alert" }, text);
}

function describe(e) {
  if (e instanceof ApiError && e.body && e.body.error) {
    return e.body.error + (e.body.detail ? " — " + e.body.detail : "");
  }
  return e.message || String(e);
}

/** Runs fn now and every `every` ms until the page changes; a failure shows, then it retries. */
function every(period, fn) {
  let timer = null;
  let live = true;
  const run = async () => {
    try {
      await fn();
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) console.warn(e);
    }
    if (live) timer = setTimeout(run, period);
  };
  run();
  return () => {
    live = false;
    clearTimeout(timer);
  };
}

function confirmDialog(title, text, ok) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = ok;
  return new Promise((resolve) => {
    const done = (answer) => {
      dialog.close();
      resolve(answer);
    };
    document.getElementById("confirm-ok").onclick = () => done(true);
    document.getElementById("confirm-no").onclick = () => done(false);
    dialog.oncancel = () => resolve(false);
    dialog.showModal();
    document.getElementById("confirm-no").focus();
  });
}

/**
 * Opens the form dialog `dialogId` with `first` focused; resolves to what `read()` answers when the
 * form is sent (undefined keeps the dialog open), or to null when it is closed with `noId` or Escape.
 */
function formDialog(dialogId, formId, noId, first, read) {
  const dialog = document.getElementById(dialogId);
  return new Promise((resolve) => {
    document.getElementById(formId).onsubmit = (ev) => {
      ev.preventDefault();
      const answer = read();
      if (answer === undefined) return;
      dialog.close();
      resolve(answer);
    };
    document.getElementById(noId).onclick = () => {
      dialog.close();
      resolve(null);
    };
    dialog.oncancel = () => resolve(null);
    dialog.showModal();
    first.focus();
  });
}

/** Asks why a route or team is to be held; resolves to the reason, or null when kept running. */
function holdDialog(title) {
  const why = document.getElementById("hold-why");
  document.getElementById("hold-title").textContent = title;
  why.value = "";
  return formDialog("hold", "hold-form", "hold-no", why, () => why.value.trim() || undefined);
}

/**
 * Holds or releases a route or team (kind "routes" or "teams") for the overview, then renders it
 * again; a refusal is shown at the top of the view.
 */
async function holdOrRelease(kind, name, hold, refresh) {
  try {
    if (hold) {
      const why = await holdDialog("Hold " + (kind === "teams" ? "team " : "route ") + name + "?");
      if (why === null) return;
      await api("/api/v1/" + kind + "/" + encodeURIComponent(name) + "/hold", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ why }) });
    } else {
      await api("/api/v1/" + kind + "/" + encodeURIComponent(name) + "/release", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    }
  } catch (e) {
    view.prepend(notice(describe(e)));
  }
  await refresh();
}

/** "held by alice 5 min ago: why", with a release button for who may. */
function heldLine(kind, name, held, refresh) {
  return h("p", { class: "warn", "data-k": "held" },
    "held by " + held.by + " " + ago(held.at) + ": " + held.why,
    me.may.hold ? h("button", { type: "button", "data-k": "release", onclick: () => holdOrRelease(kind, name, false, refresh) }, "Release") : "");
}

// ---- sign-in ---------------------------------------------------------------------------------

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  me = null;
  stopView();
  document.getElementById("nav").hidden = true;
  document.getElementById("me").hidden = true;
  renderSignIn(message);
}

function renderSignIn(message) {
  const input = h("input", {
    id: "token", type: "password", autocomplete: "off", required: true, "aria-describedby": "token-help",
  });
  const error = h("div", { id: "signin-error", class: "error", role: "alert" }, message || "");
  const form = h("form", { class: "signin", onsubmit: async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    try {
      await loadMe();
      route();
    } catch (e) {
      sessionStorage.removeItem(TOKEN_KEY);
      error.textContent = e instanceof ApiError && e.status === 401 ? "That token was refused." : describe(e);
    }
  } },
    h("h1", {}, "Sign in"),
    h("label", { for: "token" }, "API token", input),
    h("p", { id: "token-help", class: "muted" },
      "The admin token, or one from ",
      h("code", {}, "oneshot tokens create"),
      ". It stays in this tab only and is sent in a header, never in a URL."),
    h("button", { type: "submit", id: "sign-in" }, "Sign in"),
    error);
  view.replaceChildren(form);
  input.focus();
}

async function loadMe() {
  me = await api("/api/v1/whoami");
  document.getElementById("me-name").textContent = me.name + " (" + me.role + ")";
  document.getElementById("me").hidden = false;
  document.getElementById("nav").hidden = false;
}

// ---- pages -----------------------------------------------------------------------------------

/**
 * A route's last hour as a chart: queued and running builds a minute at a time, the route's limit
 * dashed, with its scale on the left and its time along the bottom; the legend says now and peak.
 */
function queueChart(points, limit) {
  const w = 320, hgt = 120, left = 26, right = 6, top = 8, bottom = 100;
  const max = Math.max(1, limit || 0, ...points.map((p) => Math.max(p.queued, p.running)));
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${w} ${hgt}`, role: "img" });
  const x = (i) => left + (points.length < 2 ? w - left - right : (i * (w - left - right)) / (points.length - 1));
  const y = (v) => bottom - ((bottom - top) * v) / max;
  const text = (tx, ty, anchor, str) => {
    const t = s("text", { x: tx, y: ty, "text-anchor": anchor });
    t.textContent = str;
    return t;
  };
  svg.append(s("line", { class: "axis", x1: left, x2: w - right, y1: bottom, y2: bottom }));
  svg.append(s("line", { class: "axis", x1: left, x2: left, y1: top, y2: bottom }));
  svg.append(text(left - 4, bottom + 3, "end", "0"), text(left - 4, top + 3, "end", String(max)));
  if (limit && limit < max) svg.append(text(left - 4, y(limit) + 3, "end", String(limit)));
  svg.append(text(left, hgt - 4, "start", "−60 min"), text((left + w - right) / 2, hgt - 4, "middle", "−30 min"),
    text(w - right, hgt - 4, "end", "now"));
  if (limit) svg.append(s("line", { class: "limit", x1: left, x2: w - right, y1: y(limit), y2: y(limit) }));
  for (const key of ["queued", "running"]) {
    const d = points.map((p, i) => (i ? "L" : "M") + x(i).toFixed(1) + " " + y(p[key]).toFixed(1)).join(" ");
    if (points.length) svg.append(s("path", { class: key, d }));
  }
  const last = points.length ? points[points.length - 1] : { queued: 0, running: 0 };
  const peakQ = Math.max(0, ...points.map((p) => p.queued));
  const peakR = Math.max(0, ...points.map((p) => p.running));
  const title = s("title", {});
  title.textContent = `last hour: queued peaked at ${peakQ}, running at ${peakR}` + (limit ? ` of ${limit}` : "");
  svg.prepend(title);
  return h("figure", { class: "chart-box" }, svg,
    h("figcaption", { class: "legend" },
      h("span", { class: "q", "data-k": "chart-queued" }, "queued " + last.queued + " (peak " + peakQ + ")"),
      h("span", { class: "r", "data-k": "chart-running" }, "running " + last.running + " (peak " + peakR + ")"),
      limit ? h("span", { class: "l" }, "limit " + limit) : null));
}

/** "3 of 40 (7.5%)" of the builds that ended in the last hour; "none ended" when none did. */
function failureRate(r) {
  if (!r.finishedLastHour) return "none ended";
  const pct = (100 * r.failedLastHour) / r.finishedLastHour;
  return r.failedLastHour + " of " + r.finishedLastHour + " (" + (pct < 10 && pct > 0 ? pct.toFixed(1) : Math.round(pct)) + "%)";
}

/**
 * A warm route's balloons on its card: running of those the leader asks for (why that many, on
 * hover), pending (waiting for a node), and their cost over the last day.
 */
function warmStats(w) {
  if (!w) return [];
  return [
    h("dt", {}, "balloons"),
    h("dd", { "data-k": "balloons", title: w.why },
      w.running + " / " + w.wanted + (w.pending ? ", " + w.pending + " pending" : "")),
    h("dt", {}, "last day"),
    h("dd", { "data-k": "balloon-cost" },
      w.balloonHours.toFixed(1) + " balloon-h, " + w.preemptions + (w.preemptions === 1 ? " build took one" : " builds took one")),
  ];
}

async function overview() {
  const root = h("div", {});
  view.replaceChildren(h("h1", {}, "Overview"), root);
  const render = async () => {
    const [routes, ov, sources, teams, running, launching] = await Promise.all([
      api("/api/v1/routes"),
      api("/api/v1/overview"),
      api("/api/v1/sources").catch(() => []),
      api("/api/v1/teams").catch(() => []),
      api("/api/v1/builds?status=running&limit=50"),
      api("/api/v1/builds?status=launching&limit=50"),
    ]);
    const health = ov.health || {};
    const k8s = health.kubernetes;
    const items = [
      h("span", {}, h("span", { class: "dot " + (health.leader ? "ok" : "") }), health.leader ? "this replica leads" : "this replica is a standby"),
      h("span", {}, h("span", { class: "dot " + (health.listener === "listening" ? "ok" : "bad") }), "listener: " + health.listener),
      h("span", {}, "global limit: " + ov.globalLimit + " builds at once"),
    ];
    const clusters = Object.entries(health.clusters || {});
    if (clusters.length) {
      // Each cluster the routes launch into: one in trouble stalls its own routes alone.
      for (const [name, c] of clusters) {
        items.push(h("span", { "data-cluster": name }, h("span", { class: "dot " + (c.ready ? "ok" : "bad") }),
          "cluster " + name + ": " + (c.ready ? "ready" : (c.trouble || "in trouble") + " (since " + ago(c.since) + ")")));
      }
    } else if (k8s) {
      items.push(h("span", {}, h("span", { class: "dot " + (k8s.reachable ? "ok" : "bad") }),
        "Kubernetes: " + (k8s.reachable ? "reachable" : "unreachable — " + (k8s.detail || ""))));
    }
    const byRoute = {};
    for (const p of ov.history || []) (byRoute[p.route] ||= []).push(p);
    const cards = routes.map((r) => h("section", { class: "card", "data-route": r.name, "aria-label": "route " + r.name },
      h("h3", {}, h("a", { href: "#/builds?route=" + encodeURIComponent(r.name) }, r.name)),
      chips(r.tags),
      h("dl", { class: "stats" },
        h("dt", {}, "running"), h("dd", { "data-k": "running" }, r.running + " / " + r.maxConcurrent),
        h("dt", {}, "queued"), h("dd", { "data-k": "queued" }, String(r.queued)),
        h("dt", {}, "oldest wait"), h("dd", { "data-k": "oldest" }, ms(r.oldestQueuedMs),
          r.oldestQueuedId ? [" (", h("a", { href: "#/builds/" + r.oldestQueuedId }, "#" + r.oldestQueuedId), ")"] : []),
        h("dt", {}, "wait p50 / p95"), h("dd", {}, ms(r.waitP50Ms) + " / " + ms(r.waitP95Ms)),
        h("dt", {}, "run p50 / p95"), h("dd", { "data-k": "run" }, ms(r.runP50Ms) + " / " + ms(r.runP95Ms)),
        h("dt", {}, "failed"), h("dd", { "data-k": "failed", class: r.failedLastHour ? "bad" : "" }, failureRate(r)),
        ...(r.team && r.team !== r.name ? [h("dt", {}, "team"), h("dd", { "data-k": "team" }, r.team)] : []),
        ...(r.cluster && r.cluster !== "home" ? [h("dt", {}, "cluster"), h("dd", { "data-k": "cluster" }, r.cluster)] : []),
        ...warmStats(r.warm)),
      ...(r.oldestQueuedReason ? [h("p", { class: "why", "data-k": "queue-why" }, "#" + r.oldestQueuedId + " waits: " + r.oldestQueuedReason)] : []),
      ...(r.stalled ? [h("p", { class: "warn", "data-k": "stalled" }, "takes no launches now (since " + ago(r.stalled.since) + "): " + r.stalled.why)] : []),
      ...(r.held ? [heldLine("routes", r.name, r.held, render)] : []),
      ...((teams || []).filter((t) => t.name === r.team && t.held && t.name !== r.name).map((t) =>
        h("p", { class: "warn", "data-k": "team-held" }, "its team " + t.name + " is held by " + t.held.by + " " + ago(t.held.at) + ": " + t.held.why))),
      ...(!r.held && me.may.hold ? [h("p", {}, h("button", { type: "button", class: "link", "data-k": "hold", onclick: () => holdOrRelease("routes", r.name, true, render) }, "Hold this route…"))] : []),
      ...(r.warm && r.warm.trouble ? [h("p", { class: "warn", "data-k": "warm-trouble" }, "balloons not kept: " + r.warm.trouble)] : []),
      queueChart(byRoute[r.name] || [], r.maxConcurrent)));
    const live = [...running.builds, ...launching.builds].sort((a, b) => a.id - b.id);
    const parts = [h("div", { class: "health" }, items),
      h("p", { class: "hint" }, "Run times, failures and charts cover the last hour."),
      h("div", { class: "cards" }, cards),
      h("h2", {}, "Running now"),
      live.length === 0 ? h("p", { class: "muted", id: "running-none" }, "Nothing runs now.") :
        h("div", { class: "table-wrap" }, h("table", { id: "running" },
          h("thead", {}, h("tr", {}, ["build", "route", "status", "runs", "for", "where"].map((c) => h("th", {}, c)))),
          h("tbody", {}, live.map((b) => h("tr", { "data-build": b.id },
            h("td", {}, h("a", { href: "#/builds/" + b.id }, "#" + b.id)),
            h("td", {}, b.route),
            h("td", {}, statusBadge(b.status)),
            h("td", {}, b.what ? h("code", { class: "what" }, b.what) : b.provisioner || ""),
            h("td", { class: "num", title: "since " + when(b.startedAt || b.claimedAt) }, ms(between(b.startedAt || b.claimedAt, null))),
            h("td", { class: "hide-narrow" }, b.status === "launching" ? b.reason || "" : (b.launch && b.launch.pod) || (b.launch && b.launch.name) || "")))))),
      (running.builds.length === 50 || launching.builds.length === 50)
        ? h("p", { class: "muted" }, h("a", { href: "#/builds?status=running" }, "More in the builds list")) : null,
    ];
    if (teamsConfigured(teams)) {
      parts.push(h("h2", {}, "Teams"));
      parts.push(h("p", { class: "hint" }, "When the global limit of " + ov.globalLimit + " is contended, free slots go to teams by weight; a team may borrow what others leave idle, and gets its share back as their builds end."));
      parts.push(h("div", { class: "table-wrap" }, h("table", { id: "teams" },
        h("thead", {}, h("tr", {}, ["team", "weight", "share", "guaranteed", "running", "borrowed", "queued", "routes", ""].map((c) => h("th", {}, c)))),
        h("tbody", {}, teams.map((t) => h("tr", { "data-team": t.name },
          h("td", {}, t.name),
          h("td", { class: "num" }, String(t.weight)),
          h("td", { class: "num", "data-k": "share" }, String(t.share)),
          h("td", { class: "num" }, t.guaranteed ? String(t.guaranteed) : "—"),
          h("td", { class: "num", "data-k": "running" }, String(t.running) + (t.maxConcurrent !== null && t.maxConcurrent !== undefined ? " / " + t.maxConcurrent : "")),
          h("td", { class: "num", "data-k": "borrowed" }, String(t.borrowed) + (t.borrowLimit !== null && t.borrowLimit !== undefined ? " of " + t.borrowLimit : "")),
          h("td", { class: "num", "data-k": "queued" }, String(t.queued)),
          h("td", {}, t.routes.join(", ")),
          h("td", {}, t.held ? heldLine("teams", t.name, t.held, render)
            : me.may.hold ? h("button", { type: "button", class: "link", "data-k": "hold", onclick: () => holdOrRelease("teams", t.name, true, render) }, "Hold…") : "")))))));
    }
    if (Array.isArray(sources) && sources.length) {
      parts.push(h("h2", {}, "Sources"));
      parts.push(h("div", { class: "table-wrap" }, h("table", {},
        h("thead", {}, h("tr", {}, h("th", {}, "source"), h("th", {}, "state"), h("th", {}, "tags"), h("th", {}, "route"), h("th", {}, "waiting"), h("th", {}, "in flight"))),
        h("tbody", {}, sources.flatMap((src) => {
          const sets = src.tagSets && src.tagSets.length ? src.tagSets : [null];
          return sets.map((t) => h("tr", {},
            h("td", {}, src.name), h("td", {}, src.up === false ? "down: " + (src.error || "") : src.leading === false ? "standby" : "up"),
            h("td", {}, t ? chips(t.tags) : ""), h("td", {}, t ? (t.route || "no route") : ""),
            h("td", { class: "num" }, t ? String(t.waiting) : ""), h("td", { class: "num" }, t ? String(t.inFlight) : "")));
        })))));
    }
    root.replaceChildren(...parts.filter(Boolean));
  };
  return every(5000, render);
}

/** Whether teams were configured (else every route is a team of its own, of weight 1). */
function teamsConfigured(teams) {
  return Array.isArray(teams) && teams.some((t) => t.routes.length !== 1 || t.routes[0] !== t.name
    || t.weight !== 1 || t.guaranteed || (t.borrowLimit !== null && t.borrowLimit !== undefined)
    || (t.maxConcurrent !== null && t.maxConcurrent !== undefined));
}

async function builds(query) {
  const q = new URLSearchParams(query || "");
  const routes = await api("/api/v1/routes").catch(() => []);
  const status = h("select", { id: "f-status", name: "status" },
    ["", "pending", "launching", "running", "succeeded", "failed", "canceled"].map((v) =>
      h("option", { value: v, selected: q.get("status") === v }, v || "any")));
  const routeSel = h("select", { id: "f-route", name: "route" },
    h("option", { value: "" }, "any"),
    routes.map((r) => h("option", { value: r.name, selected: q.get("route") === r.name }, r.name)));
  const tag = h("input", { id: "f-tag", name: "tag", placeholder: "env=prod", value: q.getAll("tag").join(",") });
  const ws = h("input", { id: "f-workspace", name: "workspace", value: q.get("workspace") || "" });
  const since = h("select", { id: "f-since", name: "since" },
    [["", "any time"], ["3600", "last hour"], ["86400", "last day"], ["604800", "last week"]].map(([v, t]) =>
      h("option", { value: v, selected: (q.get("since") || "") === v }, t)));
  const form = h("form", { class: "filters", onsubmit: (ev) => {
    ev.preventDefault();
    const n = new URLSearchParams();
    if (status.value) n.set("status", status.value);
    if (routeSel.value) n.set("route", routeSel.value);
    for (const t of tag.value.split(",").map((x) => x.trim()).filter(Boolean)) n.append("tag", t);
    if (ws.value.trim()) n.set("workspace", ws.value.trim());
    if (since.value) n.set("since", since.value);
    location.hash = "#/builds" + (n.toString() ? "?" + n : "");
  } },
    h("label", {}, "status", status), h("label", {}, "route", routeSel), h("label", {}, "tags", tag),
    h("label", {}, "workspace", ws), h("label", {}, "created", since), h("button", { type: "submit" }, "Filter"));
  const body = h("tbody", {});
  const err = h("div", {});
  const before = q.get("before");
  const pager = h("div", { class: "pager" });
  view.replaceChildren(h("h1", {}, "Builds"), form, err,
    h("div", { class: "table-wrap" }, h("table", { id: "builds" },
      h("thead", {}, h("tr", {}, h("th", {}, "build"), h("th", {}, "status"), h("th", {}, "route"),
        h("th", { class: "hide-narrow" }, "runs"),
        h("th", { class: "hide-narrow" }, "tags"), h("th", { class: "hide-narrow" }, "workspace"),
        h("th", {}, "created"), h("th", { class: "hide-narrow" }, "took"), h("th", { class: "hide-narrow" }, "reason"))),
      body)),
    pager);
  const load = async () => {
    const p = new URLSearchParams();
    for (const k of ["status", "route", "workspace"]) if (q.get(k)) p.set(k, q.get(k));
    for (const t of q.getAll("tag")) p.append("tag", t);
    if (q.get("since")) p.set("since", new Date(Date.now() - 1000 * Number(q.get("since"))).toISOString());
    if (before) p.set("before", before);
    p.set("limit", "50");
    let list;
    try {
      list = (await api("/api/v1/builds?" + p)).builds;
      err.replaceChildren();
    } catch (e) {
      err.replaceChildren(notice(describe(e)));
      throw e;
    }
    body.replaceChildren(...list.map((b) => h("tr", { "data-build": b.id },
      h("td", {}, h("a", { href: "#/builds/" + b.id }, "#" + b.id)),
      // A queued build says why it waits; on a phone, where the reason column is hidden, under
      // its status.
      h("td", {}, statusBadge(b.status),
        b.status === "pending" && b.reason ? h("div", { class: "why show-narrow" }, b.reason) : null),
      h("td", {}, b.route),
      h("td", { class: "hide-narrow" }, b.what ? h("code", { class: "what", title: b.what }, b.what) : b.provisioner || ""),
      h("td", { class: "hide-narrow" }, chips(b.tags)),
      h("td", { class: "hide-narrow" }, b.workspace || ""),
      h("td", { class: "nowrap", title: when(b.createdAt) }, ago(b.createdAt)),
      // An ended build took from its enqueue to its end; a live one has been running (or
      // launching) this long so far.
      h("td", { class: "hide-narrow num nowrap", "data-k": "took" }, b.finishedAt ? ms(between(b.createdAt, b.finishedAt))
        : b.startedAt || b.claimedAt ? ms(between(b.startedAt || b.claimedAt, null)) + " so far" : ""),
      h("td", { class: "hide-narrow" + (b.status === "pending" ? " why" : "") }, b.reason || ""))));
    if (list.length === 0) body.append(h("tr", {}, h("td", { colspan: 9, class: "muted" }, "No build matches.")));
    const base = new URLSearchParams(q);
    base.delete("before");
    const links = [];
    if (before) links.push(h("a", { href: "#/builds" + (base.toString() ? "?" + base : ""), class: "button" }, "Newest"));
    if (list.length === 50) {
      const older = new URLSearchParams(base);
      older.set("before", list[list.length - 1].id);
      links.push(h("a", { href: "#/builds?" + older, class: "button" }, "Older"));
    }
    links.push(h("span", { class: "muted" }, before ? "" : "updating live"));
    pager.replaceChildren(...links);
  };
  // The first page follows new builds; an older page stays as it is.
  return before ? (load().catch(() => {}), () => {}) : every(3000, load);
}

/** The stage a timeline event starts, for the bar: a status change, or a milestone. */
function stageOf(e) {
  if (e.from !== e.to) {
    return { pending: "queued", launching: "launching", running: "running" }[e.to] || null;
  }
  const r = e.reason || "";
  let m = /^terraform (\w+) started/.exec(r);
  if (m) return m[1];
  if (/script started/.test(r)) return "script";
  if (/Coder daemon/.test(r)) return "coder";
  if (/^(already )?launched/.test(r)) return "starting";
  if (/scheduled/i.test(r)) return "starting";
  return null;
}

function timelineBar(b) {
  const segs = [];
  const events = b.events || [];
  for (const e of events) {
    const st = stageOf(e);
    if (!st) continue;
    if (segs.length) segs[segs.length - 1].end = e.at;
    segs.push({ stage: st, start: e.at, end: null });
  }
  if (segs.length === 0 && b.createdAt) segs.push({ stage: "queued", start: b.createdAt, end: null });
  if (segs.length) segs[segs.length - 1].end = b.finishedAt || null;
  const total = segs.reduce((a, x) => a + Math.max(0, between(x.start, x.end)), 0) || 1;
  const bar = h("div", { class: "bar", role: "img", "aria-label": "stages: " + segs.map((x) => x.stage + " " + ms(between(x.start, x.end))).join(", ") },
    segs.map((x) => h("div", { class: "seg " + x.stage, title: x.stage + ": " + ms(between(x.start, x.end)), "data-w": (100 * Math.max(0, between(x.start, x.end))) / total })));
  // Widths go through the CSSOM, which the Content-Security-Policy allows (no inline style).
  for (const seg of bar.children) seg.style.flexGrow = String(Math.max(0.4, Number(seg.dataset.w)));
  const legend = h("ul", { class: "stages" }, segs.map((x) => h("li", {},
    h("span", { class: "sw seg " + x.stage }), x.stage + " " + ms(between(x.start, x.end)) + (x.end ? "" : b.finishedAt ? "" : " (now)"))));
  return [bar, legend];
}

/** A build's own pod settings in a line, as `builds show` prints them. */
function podText(pod) {
  const pairs = (o) => Object.entries(o || {}).map(([k, v]) => k + "=" + v).join(" ");
  const parts = [];
  for (const kind of ["requests", "limits"]) {
    const m = (pod.resources || {})[kind];
    if (m && Object.keys(m).length) parts.push(kind + " " + pairs(m));
  }
  if (pod.image) parts.push("image " + pod.image);
  for (const k of ["nodeSelector", "labels", "annotations"]) if (pod[k] && Object.keys(pod[k]).length) parts.push(k + " " + pairs(pod[k]));
  if (pod.tolerations && pod.tolerations.length) {
    parts.push("tolerations " + pod.tolerations.map((t) => t.key + (t.value ? "=" + t.value : "") + (t.effect ? ":" + t.effect : "")).join(" "));
  }
  if (pod.serviceAccount) parts.push("serviceAccount " + pod.serviceAccount);
  return parts.join("; ");
}

/** Bytes as Kubernetes writes a memory quantity: whole Gi when they are, else Mi. */
function memoryQuantity(bytes) {
  const mi = Math.round(bytes / 1048576);
  return mi % 1024 === 0 ? mi / 1024 + "Gi" : mi + "Mi";
}

/**
 * What a finished build met of its pod's limits, said plainly, with the rerun that asks for more
 * in one step (twice the memory limit it hit), when the token may submit.
 */
function limitsHit(b, head) {
  const u = b.usage;
  if (!u) return [];
  const out = [];
  if (u.oomKills > 0) {
    const limit = u.memoryLimitBytes ? memoryQuantity(u.memoryLimitBytes) : null;
    const more = u.memoryLimitBytes ? memoryQuantity(u.memoryLimitBytes * 2) : null;
    const finished = ["succeeded", "failed", "canceled"].includes(b.status);
    out.push(h("p", { class: "warn", id: "oom" },
      limit ? "This build hit its " + limit + " memory limit: the kernel killed " + u.oomKills + (u.oomKills === 1 ? " process." : " processes.")
        : "The kernel killed " + u.oomKills + " of this build's processes for memory.",
      more && finished && me.may.submit ? h("button", { type: "button", id: "rerun-more", onclick: async () => {
        try {
          const made = await api("/api/v1/builds/" + b.id + "/rerun", { method: "POST", headers: { "Content-Type": "application/json" },
            body: JSON.stringify({ pod: { resources: { requests: { memory: more }, limits: { memory: more } } } }) });
          location.hash = "#/builds/" + made.id;
        } catch (e) {
          head.prepend(notice(describe(e)));
        }
      } }, "Rerun with " + more) : null));
  }
  if (u.cpuThrottledSeconds >= 1) {
    out.push(h("p", { class: "warn", id: "throttled" }, "Throttled for " + u.cpuThrottledSeconds.toFixed(1) + " s by its CPU limit" +
      (u.cpuLimitCores ? " of " + (u.cpuLimitCores * 1000 % 1000 === 0 ? u.cpuLimitCores : Math.round(u.cpuLimitCores * 1000) + "m") : "") + "."));
  }
  return out;
}

async function buildPage(id) {
  const head = h("div", {});
  const logBox = h("div", { class: "log", id: "log", tabindex: "0", "aria-label": "build log" });
  const firstError = h("button", { type: "button", id: "first-error", hidden: true, onclick: () => {
    const t = logBox.querySelector(".line.level-error, .line.stderr");
    if (!t) return;
    const d = t.closest("details");
    if (d) d.open = true;
    logBox.querySelectorAll(".target").forEach((x) => x.classList.remove("target"));
    t.classList.add("target");
    t.scrollIntoView({ block: "center" });
  } }, "Jump to first error");
  const follow = h("span", { class: "muted", id: "log-state" });
  view.replaceChildren(head, h("h2", {}, "Log"), h("div", { class: "log-tools" }, firstError, follow), logBox);

  let build = null;
  const render = () => {
    const b = build;
    const cancelable = ["pending", "launching", "running"].includes(b.status);
    const mayCancel = me.may.cancel === "any" || (me.may.cancel === "own" && b.submittedBy === me.name);
    const why = me.may.cancel === "no" ? "A " + me.role + " token may not cancel builds." : "This token may cancel only the builds it submitted.";
    const cancel = cancelable
      ? h("button", { type: "button", id: "cancel", class: "danger", disabled: !mayCancel, title: mayCancel ? null : why, onclick: async () => {
          if (!(await confirmDialog("Cancel build #" + b.id + "?", "A running build is stopped: terraform gets an interrupt and saves its state.", "Cancel build"))) return;
          try {
            await api("/api/v1/builds/" + b.id + "/cancel", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
            await refresh();
          } catch (e) {
            head.prepend(notice(describe(e)));
          }
        } }, "Cancel")
      : null;
    const ended = ["succeeded", "failed", "canceled"].includes(b.status);
    const rerunWhy = me.may.cancel === "no" ? "A " + me.role + " token may not rerun builds." : "This token may rerun only the builds it submitted.";
    const rerun = ended
      ? [h("button", { type: "button", id: "rerun", disabled: !mayCancel, title: mayCancel ? null : rerunWhy, onclick: () => rerunBuild(b, false, head) }, "Rerun"),
        h("button", { type: "button", id: "rerun-changed", class: "link", disabled: !mayCancel, title: mayCancel ? null : rerunWhy, onclick: () => rerunBuild(b, true, head) }, "Rerun with changes…")]
      : [];
    const launch = b.launch || {};
    // A Job the rescuer deleted is no longer there for kubectl: say when and why it went instead.
    const kubectl = launch.kind === "kubernetes" && launch.name && !launch.removedAt
      ? "kubectl logs -n " + (launch.namespace || "default") + " job/" + launch.name + " -f"
      : null;
    const outputs = b.outputs && Object.keys(b.outputs).length
      ? h("table", {}, h("tbody", {}, Object.entries(b.outputs).map(([k, v]) => h("tr", {},
          h("th", {}, k), h("td", {}, v && v.sensitive ? "(sensitive)" : h("code", {}, JSON.stringify(v && "value" in v ? v.value : v)))))))
      : h("span", { class: "muted" }, "none");
    head.replaceChildren();
    append(head, [
      h("h1", {}, "Build #" + b.id, statusBadge(b.status), cancel, ...rerun, cancelable && !mayCancel ? h("span", { class: "muted", id: "cancel-why" }, why) : null),
      b.rerunOf ? h("p", { class: "muted" }, "a rerun of ", h("a", { href: "#/builds/" + b.rerunOf }, "#" + b.rerunOf)) : null,
      h("p", { class: "reason", id: "reason" }, b.reason || ""),
      b.error && b.error !== b.reason ? h("p", { class: "error" }, b.error) : null,
      ...limitsHit(b, head),
      ...timelineBar(b),
      h("h2", {}, "Details"),
      h("dl", { class: "facts" },
        h("dt", {}, "runs"), h("dd", { id: "what" }, b.what ? h("code", {}, b.what) : b.provisioner || "—"),
        h("dt", {}, "route"), h("dd", {}, b.route),
        h("dt", {}, "tags"), h("dd", {}, chips(b.tags)),
        h("dt", {}, "workspace"), h("dd", {}, b.workspace ? h("a", { href: workspaceHref(b.route, b.workspace) }, b.workspace) : "none"),
        h("dt", {}, "attempt"), h("dd", {}, String(b.attempt)),
        b.pod ? h("dt", {}, "pod") : null,
        b.pod ? h("dd", { id: "pod" }, podText(b.pod)) : null,
        h("dt", {}, "submitted by"), h("dd", {}, b.submittedBy || "—"),
        h("dt", {}, "created"), h("dd", {}, when(b.createdAt)),
        h("dt", {}, "finished"), h("dd", {}, b.finishedAt ? when(b.finishedAt) + " (" + ms(between(b.createdAt, b.finishedAt)) + " in all)" : "—"),
        h("dt", {}, "state read / written"), h("dd", {}, (b.stateRead ?? "—") + " / " + (b.stateWritten ?? "—")),
        h("dt", {}, "launched as"), h("dd", {}, launch.name ? (launch.kind + " " + (launch.namespace ? launch.namespace + "/" : "") + launch.name + (launch.pod ? ", " + (launch.kind === "kubernetes" ? "pod " : "") + launch.pod : "")) : "—"),
        launch.removedAt ? h("dt", {}, "removed") : null,
        launch.removedAt ? h("dd", { id: "removed" }, when(launch.removedAt) + ": " + (launch.removedWhy || "")) : null,
        kubectl ? h("dt", {}, "read it with") : null,
        kubectl ? h("dd", { class: "copy" }, h("code", { id: "kubectl" }, kubectl),
          h("button", { type: "button", onclick: (ev) => navigator.clipboard?.writeText(kubectl).then(() => { ev.target.textContent = "Copied"; }) }, "Copy")) : null,
        h("dt", {}, "outputs"), h("dd", {}, outputs)),
      h("h2", {}, "Timeline"),
      h("div", { class: "table-wrap" }, h("table", { id: "events" }, h("tbody", {}, (b.events || []).map((e) => h("tr", {},
        h("td", { title: when(e.at) }, clock(e.at)),
        h("td", {}, e.attempt > 0 ? "attempt " + e.attempt : ""),
        h("td", {}, e.from === e.to ? e.to : (e.from || "new") + " → " + e.to),
        h("td", {}, e.reason || ""))))))]);
  };
  const refresh = async () => {
    build = await api("/api/v1/builds/" + id);
    render();
  };
  try {
    await refresh();
  } catch (e) {
    head.replaceChildren(h("h1", {}, "Build #" + id), notice(describe(e)));
    return () => {};
  }
  const stopRefresh = every(3000, async () => {
    if (["pending", "launching", "running"].includes(build.status)) await refresh();
  });
  const stopLog = streamLog(id, logBox, follow, firstError, () => ["pending", "launching", "running"].includes(build.status),
    () => build.status);
  return () => {
    stopRefresh();
    stopLog();
  };
}

/**
 * Reruns a finished build and opens the new one: as it was, or (changed) with the CPU, memory and
 * image asked for in a dialog, as `oneshot builds rerun --cpu --memory --image` sends them. A
 * refusal (the route does not allow a setting, a size over its maximum) is shown where it was
 * asked.
 */
async function rerunBuild(b, changed, head) {
  let pod = null;
  if (changed) {
    pod = await rerunDialog(b);
    if (pod === null) return;
  }
  try {
    const r = await api("/api/v1/builds/" + b.id + "/rerun", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(pod && Object.keys(pod).length ? { pod } : {}) });
    location.hash = "#/builds/" + r.id;
  } catch (e) {
    head.prepend(notice(describe(e)));
  }
}

/** The rerun dialog: resolves to the pod settings to change ({} for none), or null when kept. */
function rerunDialog(b) {
  const [cpu, memory, image] = ["cpu", "memory", "image"].map((k) => document.getElementById("rerun-" + k));
  const res = (b.pod && b.pod.resources) || {};
  cpu.value = "";
  memory.value = "";
  image.value = "";
  cpu.placeholder = (res.requests && res.requests.cpu) || "as its route's template";
  memory.placeholder = (res.limits && res.limits.memory) || (res.requests && res.requests.memory) || "as its route's template";
  image.placeholder = (b.pod && b.pod.image) || "as its route's template";
  document.getElementById("rerun-title").textContent = "Rerun build #" + b.id + " with changes";
  return formDialog("rerun-dialog", "rerun-form", "rerun-no", cpu, () => {
    const pod = {};
    const requests = {}, limits = {};
    if (cpu.value.trim()) requests.cpu = cpu.value.trim();
    if (memory.value.trim()) requests.memory = limits.memory = memory.value.trim();
    if (Object.keys(requests).length) pod.resources = { requests };
    if (Object.keys(limits).length) pod.resources.limits = limits;
    if (image.value.trim()) pod.image = image.value.trim();
    return pod;
  });
}

/**
 * The build's log through GET /api/v1/builds/:id/logs (NDJSON), following it while the build
 * runs: the same stream `oneshot builds logs -f` reads. Terraform's stages fold like a CI job's.
 */

function streamLog(id, box, state, firstError, running, status) {
  const ctrl = new AbortController();
  let after = 0;
  let section = null;
  let sectionStage = undefined;
  let stopped = false;
  const atBottom = () => box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  const add = (l) => {
    after = Math.max(after, l.seq);
    const stage = l.stage || null;
    if (!section || stage !== sectionStage) {
      sectionStage = stage;
      section = stage ? h("details", { open: true, "data-stage": stage }, h("summary", {}, stage)) : h("div", {});
      box.append(section);
    }
    const classes = ["line", l.stream, l.level ? "level-" + l.level : ""].join(" ");
    section.append(h("div", { class: classes, "data-seq": l.seq },
      h("span", { class: "ts" }, clock(l.ts)),
      h("span", { class: "text" }, l.text)));
    if (l.level === "error" || l.stream === "stderr") firstError.hidden = false;
    if (state.textContent.startsWith("no log yet")) state.textContent = "following the log live";
  };
  const run = async () => {
    while (!stopped) {
      const follow = running();
      // A build not started yet has no log: say what it waits for rather than "following".
      state.textContent = !follow ? "" : ["pending", "launching"].includes(status()) && !box.querySelector(".line")
        ? "no log yet: the build has not started; its log shows here when it does"
        : "following the log live";
      let res;
      try {
        res = await fetch("/api/v1/builds/" + id + "/logs?after=" + after + (follow ? "&follow=true" : ""), {
          headers: { Authorization: "Bearer " + token(), Accept: "application/x-ndjson" },
          signal: ctrl.signal,
        });
      } catch (e) {
        if (stopped) return;
        state.textContent = "log stream interrupted; reconnecting";
        await new Promise((r) => setTimeout(r, 2000));
        continue;
      }
      if (!res.ok) {
        state.textContent = "log: HTTP " + res.status;
        return;
      }
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += decoder.decode(value, { stream: true });
          const stick = atBottom();
          let nl;
          while ((nl = buf.indexOf("\n")) >= 0) {
            const text = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (text.trim()) add(JSON.parse(text));
          }
          if (stick) box.scrollTop = box.scrollHeight;
        }
      } catch (e) {
        if (stopped) return;
      }
      if (!follow) {
        state.textContent = box.querySelector(".line") ? "" : "no log lines";
        return;
      }
      // A followed stream ends with the build, or when the replica stops: read on from the last line.
    }
  };
  run();
  return () => {
    stopped = true;
    ctrl.abort();
  };
}

// A workspace is its route's: team A's "prod" and team B's "prod" are two workspaces.
function workspaceHref(route, name) {
  return "#/workspaces/" + encodeURIComponent(route) + "/" + encodeURIComponent(name);
}

// #/workspaces/ROUTE/NAME, or #/workspaces/NAME when one route of the caller's has it.
async function workspaces(first, second) {
  if (second) return workspacePage(first, second);
  if (first) return workspacePage(null, first);
  const box = h("div", {});
  view.replaceChildren(h("h1", {}, "Workspaces"),
    h("p", { class: "hint" }, "A workspace runs one build at a time: its earliest unfinished build holds it, and the others wait behind that one in order."),
    box);
  return every(5000, async () => {
    const list = (await api("/api/v1/workspaces")).workspaces;
    box.replaceChildren(list.length === 0 ? h("p", { class: "muted" }, "No workspace has state or an unfinished build yet.") :
      h("div", { class: "table-wrap" }, h("table", { id: "workspaces" },
        h("thead", {}, h("tr", {}, ["workspace", "route", "held by", "waiting", "latest version", "versions", "changed"].map((c) => h("th", {}, c)))),
        h("tbody", {}, list.map((w) => h("tr", { "data-workspace": w.route + "/" + w.workspace },
          h("td", {}, h("a", { href: workspaceHref(w.route, w.workspace) }, w.workspace)),
          h("td", {}, w.route),
          h("td", { "data-k": "held-by" }, w.heldBy ? [h("a", { href: "#/builds/" + w.heldBy }, "#" + w.heldBy), " ", statusBadge(w.heldByStatus),
            h("span", { class: "muted" }, " for " + ms(between(w.busySince, null)))] : h("span", { class: "muted" }, "free")),
          h("td", { "data-k": "waiting" }, w.waiting ? [String(w.waiting) + ": ",
            w.waitingBuilds.map((id, i) => [i ? ", " : "", h("a", { href: "#/builds/" + id }, "#" + id)]), w.waiting > w.waitingBuilds.length ? ", …" : ""] : "0"),
          h("td", { class: "num" }, w.latest ?? "—"), h("td", { class: "num" }, String(w.versions)),
          h("td", { class: "nowrap", title: when(w.updatedAt) }, w.updatedAt ? ago(w.updatedAt) : "—")))))));
  });
}

function workspaceQuery(route, name) {
  return (route ? "route=" + encodeURIComponent(route) + "&" : "") + "workspace=" + encodeURIComponent(name);
}

async function workspacePage(route, name) {
  const body = h("div", {});
  const recent = h("div", {});
  const of = h("p", { class: "muted", id: "workspace-route" }, route ? "route " + route : "");
  view.replaceChildren(h("h1", {}, "Workspace " + name), of, h("h2", {}, "Builds"), recent, h("h2", {}, "State versions"), body);
  // Its latest builds, newest first: the one that holds it and those waiting behind it among them.
  const stopBuilds = every(5000, async () => {
    const list = (await api("/api/v1/builds?" + workspaceQuery(route, name) + "&limit=20")).builds;
    recent.replaceChildren(list.length === 0 ? h("p", { class: "muted" }, "No build of this workspace yet.") :
      h("div", { class: "table-wrap" }, h("table", { id: "workspace-builds" },
        h("thead", {}, h("tr", {}, ["build", "status", "runs", "created", "reason"].map((c) => h("th", {}, c)))),
        h("tbody", {}, list.map((b) => h("tr", { "data-build": b.id },
          h("td", {}, h("a", { href: "#/builds/" + b.id }, "#" + b.id)),
          h("td", {}, statusBadge(b.status)),
          h("td", {}, b.what ? h("code", { class: "what", title: b.what }, b.what) : b.provisioner || ""),
          h("td", { class: "nowrap", title: when(b.createdAt) }, ago(b.createdAt)),
          h("td", { class: b.status === "pending" ? "why" : "" }, b.reason || "")))))));
  });
  try {
    const r = await api("/api/v1/workspaces/states?" + workspaceQuery(route, name));
    route = r.route;
    of.textContent = "route " + route;
    body.replaceChildren(r.versions.length === 0 ? h("p", { class: "muted" }, "No state yet.") : h("div", { class: "table-wrap" }, h("table", { id: "versions" },
      h("thead", {}, h("tr", {}, h("th", {}, "version"), h("th", {}, "build"), h("th", {}, "serial"), h("th", {}, "size"), h("th", {}, "when"), h("th", {}, ""))),
      h("tbody", {}, r.versions.map((v) => h("tr", {},
        h("td", { class: "num" }, String(v.version)),
        h("td", {}, h("a", { href: "#/builds/" + v.buildId }, "#" + v.buildId), v.finished ? "" : " (applying)"),
        h("td", { class: "num" }, v.serial ?? "—"), h("td", { class: "num" }, v.bytes + " B"),
        h("td", { title: when(v.updatedAt) }, ago(v.updatedAt)),
        h("td", {}, me.may.readState ? h("button", { type: "button", onclick: () => download(route, name, v.version).catch((e) => body.prepend(notice(describe(e)))) }, "Download") : "")))))));
  } catch (e) {
    body.replaceChildren(notice(describe(e)));
  }
  return stopBuilds;
}

async function download(route, name, version) {
  const res = await fetch("/api/v1/workspaces/state?" + workspaceQuery(route, name) + "&version=" + version, {
    headers: { Authorization: "Bearer " + token() },
  });
  if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => null));
  const url = URL.createObjectURL(await res.blob());
  const a = h("a", { href: url, download: route + "-" + name.replaceAll("/", "-") + "-v" + version + ".tfstate" });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// ---- routing ---------------------------------------------------------------------------------

async function route() {
  stopView();
  stopView = () => {};
  if (!token()) return renderSignIn();
  if (!me) {
    try {
      await loadMe();
    } catch (e) {
      return;
    }
  }
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const parts = path.split("/").filter(Boolean);
  const section = parts[0] || "overview";
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.nav === section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  try {
    if (section === "builds" && parts[1]) stopView = await buildPage(Number(parts[1]));
    else if (section === "builds") stopView = await builds(query);
    else if (section === "workspaces") stopView = await workspaces(parts[1] ? decodeURIComponent(parts[1]) : null, parts[2] ? decodeURIComponent(parts[2]) : null);
    else stopView = await overview();
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) view.replaceChildren(notice(describe(e)));
  }
  document.title = "oneshot — " + (section === "builds" && parts[1] ? "build #" + parts[1] : section);
}

document.getElementById("sign-out").addEventListener("click", () => signOut());
// Times in UTC or this browser's zone, as the CLI's --utc: the switch says which it shows now.
const timesButton = document.getElementById("times");
const showTimes = () => { timesButton.textContent = utcTimes() ? "Times: UTC" : "Times: local"; };
showTimes();
timesButton.addEventListener("click", () => {
  localStorage.setItem("oneshot.times", utcTimes() ? "local" : "utc");
  showTimes();
  route();
});
// The skip link moves focus to the page's content; followed as a link, "#view" would be a route.
document.querySelector(".skip").addEventListener("click", (ev) => {
  ev.preventDefault();
  view.focus();
});
window.addEventListener("hashchange", route);
route();
