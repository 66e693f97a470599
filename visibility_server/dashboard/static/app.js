// queuescope dashboard: polls the dashboard's JSON endpoints with If-None-Match every few
// seconds (a 304 costs the server next to nothing), pauses while the tab is hidden, and
// renders with plain DOM calls (no framework, nothing fetched from elsewhere).
"use strict";

const POLL_MS = 3000;
const API = "/dashboard/api/v1";

const state = {
  namespace: "",
  selected: null, // {kind: "cq", name} or {kind: "lq", namespace, name}
  overview: null,
  pending: null,
  etags: new Map(), // url -> ETag of the body we hold
  bodies: new Map(), // url -> parsed body
  timer: null,
  updates: 0,
  lastOk: null,
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("data-") || key === "title" || key === "role") {
      node.setAttribute(key, String(value));
    } else node[key] = value;
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

class HttpError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

// GET with If-None-Match; returns [body, changed].
async function getJSON(url) {
  const headers = { Accept: "application/json" };
  const etag = state.etags.get(url);
  if (etag) headers["If-None-Match"] = etag;
  const response = await fetch(url, { headers, cache: "no-store", credentials: "same-origin" });
  if (response.status === 304 && state.bodies.has(url)) return [state.bodies.get(url), false];
  if (!response.ok) {
    let message = response.statusText;
    try {
      message = (await response.json()).message || message;
    } catch (_) {
      /* not a Status */
    }
    throw new HttpError(response.status, message);
  }
  const body = await response.json();
  state.etags.set(url, response.headers.get("ETag"));
  state.bodies.set(url, body);
  return [body, true];
}

// -- formatting ---------------------------------------------------------------------------

function duration(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return "";
  seconds = Math.max(0, Math.round(seconds));
  if (seconds < 60) return `${seconds}s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m}m${seconds % 60 ? `${seconds % 60}s` : ""}`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h${m % 60 ? `${m % 60}m` : ""}`;
  return `${Math.floor(h / 24)}d`;
}

function age(timestamp) {
  return duration((Date.now() - Date.parse(timestamp)) / 1000);
}

// The forecast start, counted from now; the band and the forecast's age below it, so an
// old forecast is never read as a fresh one (docs/dashboard.md).
function untilText(timestamp) {
  const seconds = (Date.parse(timestamp) - Date.now()) / 1000;
  return seconds > 0 ? duration(seconds) : "0s";
}

function startCell(start) {
  if (!start) return el("td", { class: "start" }, "unknown");
  const due = Date.parse(start.p50) <= Date.now();
  return el(
    "td",
    {
      class: "start",
      "data-testid": "estimated-start",
      title: `median ${start.p50}, 90%: ${start.low} to ${start.high}; ${start.method}, made at ${start.madeAt} from snapshot ${start.snapshot}`,
    },
    due ? "due" : `~${untilText(start.p50)}`,
    el("div", { class: "sub" }, `90%: ${untilText(start.low)}–${untilText(start.high)}`),
    el("div", { class: "sub", "data-testid": "forecast-age" }, `${start.method}, ${age(start.madeAt)} old`),
  );
}

function blockerText(b) {
  if (b.kind === "Quota") return `${b.resource} in ${b.flavor}: ${b.amount} more needed`;
  if (b.kind === "Capacity") return `${b.resource} in ${b.flavor}: over the maximum ${b.amount}`;
  if (b.kind === "Taint") return `untolerated taint in ${b.flavor}`;
  if (b.kind === "NodeAffinity") return `${b.flavor} does not match node affinity`;
  if (b.kind === "FlavorNotFound") return `flavor ${b.flavor} not found`;
  return b.message;
}

// -- the cohort tree ----------------------------------------------------------------------

function bar(r, isCohort) {
  const capacity = isCohort ? r.subtreeQuota : r.nominal;
  const ceiling = isCohort
    ? Math.max(capacity, r.usage, 1)
    : Math.max(capacity + (r.borrowingLimit ?? r.borrowed), r.usage, capacity, 1);
  const pct = (v) => `${(100 * v) / ceiling}%`;
  const within = Math.min(r.usage, capacity);
  const parts = [el("span", { class: "used", style: "" })];
  parts[0].style.left = "0";
  parts[0].style.width = pct(within);
  if (!isCohort && r.borrowed > 0) {
    const b = el("span", { class: "borrowed" });
    b.style.left = pct(capacity);
    b.style.width = pct(r.borrowed);
    parts.push(b);
  }
  if (!isCohort && r.lendable > 0) {
    const l = el("span", { class: "lendable" });
    l.style.left = pct(within);
    l.style.width = pct(r.lendable);
    parts.push(l);
  }
  if (!isCohort && capacity > 0 && ceiling > capacity) {
    const n = el("span", { class: "nominal" });
    n.style.left = "0";
    n.style.width = pct(capacity);
    parts.push(n);
  }
  if (!isCohort && r.borrowingLimit !== null && r.borrowingLimit !== undefined) {
    const m = el("span", { class: "limit" });
    m.style.left = `calc(${pct(capacity + r.borrowingLimit)} - 2px)`;
    parts.push(m);
  }
  const d = r.display;
  const label = isCohort
    ? `${d.usage} of ${d.subtreeQuota} shared`
    : `${d.usage} / ${d.nominal}` +
      (r.borrowed ? `, borrowed ${d.borrowed}` : "") +
      (r.lendable && r.lendingLimit !== null ? `, lends ≤ ${d.lendingLimit}` : "") +
      (r.borrowingLimit !== null ? `, borrows ≤ ${d.borrowingLimit}` : "");
  return [
    el("span", {}, `${r.flavor} · ${r.resource}`),
    el("div", { class: "bar", title: label, "data-resource": `${r.flavor}/${r.resource}` }, parts),
    el("span", { class: "value" }, label),
  ];
}

function clusterQueueCard(cq) {
  const selected = state.selected && state.selected.kind === "cq" && state.selected.name === cq.name;
  const card = el(
    "div",
    { class: `card cq${selected ? " selected" : ""}`, "data-cq": cq.name, role: "button" },
    el(
      "div",
      { class: "title" },
      el("span", { class: "kind" }, "ClusterQueue"),
      el("span", { class: "name" }, cq.name),
      cq.active
        ? el("span", { class: "badge" }, cq.strategy)
        : el("span", { class: "badge inactive" }, `inactive: ${cq.inactiveReasons.join(", ")}`),
      el(
        "span",
        { class: "facts" },
        `${cq.pending} pending · ${cq.reserving} admitted · ${cq.admissionsPerHour}/h admitted recently`,
      ),
    ),
    cq.resources.length ? el("div", { class: "bars" }, cq.resources.map((r) => bar(r, false))) : null,
  );
  card.addEventListener("click", () => select({ kind: "cq", name: cq.name }));
  return card;
}

function cohortCard(cohort) {
  return el(
    "div",
    { class: "card cohort", "data-cohort": cohort.name },
    el(
      "div",
      { class: "title" },
      el("span", { class: "kind" }, "Cohort"),
      el("span", { class: "name" }, cohort.name),
    ),
    cohort.resources.length
      ? el("div", { class: "bars" }, cohort.resources.map((r) => bar(r, true)))
      : null,
  );
}

function renderTree(overview) {
  const tree = $("tree");
  tree.replaceChildren();
  const byCohort = new Map();
  for (const cq of overview.clusterQueues) {
    const key = overview.allClusterQueues ? cq.cohort : "";
    if (!byCohort.has(key)) byCohort.set(key, []);
    byCohort.get(key).push(cq);
  }
  if (!overview.allClusterQueues) {
    if (!overview.clusterQueues.length) {
      tree.append(el("p", { class: "empty" }, "No ClusterQueue you may see."));
    }
    for (const cq of overview.clusterQueues) tree.append(el("div", { class: "node" }, clusterQueueCard(cq)));
    return;
  }
  const children = new Map();
  for (const c of overview.cohorts) {
    if (!children.has(c.parent)) children.set(c.parent, []);
    children.get(c.parent).push(c);
  }
  const drawn = new Set();
  function draw(cohort) {
    drawn.add(cohort.name);
    return el(
      "div",
      { class: "node" },
      cohortCard(cohort),
      (children.get(cohort.name) || []).filter((c) => !drawn.has(c.name)).map(draw),
      (byCohort.get(cohort.name) || []).map((cq) => el("div", { class: "node" }, clusterQueueCard(cq))),
    );
  }
  const known = new Set(overview.cohorts.map((c) => c.name));
  for (const c of overview.cohorts) if (!c.parent || !known.has(c.parent)) tree.append(draw(c));
  for (const c of overview.cohorts) if (!drawn.has(c.name)) tree.append(draw(c)); // cycles
  for (const cq of byCohort.get("") || []) tree.append(el("div", { class: "node" }, clusterQueueCard(cq)));
}

function renderLocalQueues(overview) {
  const list = $("local-queues");
  list.replaceChildren();
  if (!overview.localQueues.length) {
    const hint = overview.allLocalQueues || overview.namespace
      ? "No LocalQueue you may see."
      : "Enter a namespace above to see its LocalQueues.";
    list.append(el("li", { class: "empty" }, hint));
  }
  for (const lq of overview.localQueues) {
    const s = state.selected;
    const selected = s && s.kind === "lq" && s.namespace === lq.namespace && s.name === lq.name;
    const item = el(
      "li",
      { class: selected ? "selected" : "", "data-lq": `${lq.namespace}/${lq.name}` },
      `${lq.namespace}/${lq.name}`,
      el("span", { class: "count" }, `${lq.pending} pending → ${lq.clusterQueue || "(no ClusterQueue)"}`),
    );
    item.addEventListener("click", () => select({ kind: "lq", namespace: lq.namespace, name: lq.name }));
    list.append(item);
  }
}

// -- the pending table --------------------------------------------------------------------

function pendingUrl(sel) {
  if (sel.kind === "cq") return `${API}/clusterqueues/${encodeURIComponent(sel.name)}/pending`;
  return `${API}/namespaces/${encodeURIComponent(sel.namespace)}/localqueues/${encodeURIComponent(sel.name)}/pending`;
}

function renderPending(list) {
  const section = $("pending-section");
  if (!state.selected || !list) {
    section.hidden = true;
    return;
  }
  section.hidden = false;
  const sel = state.selected;
  $("pending-title").textContent =
    sel.kind === "cq"
      ? `Pending in ClusterQueue ${sel.name}`
      : `Pending in LocalQueue ${sel.namespace}/${sel.name} (ClusterQueue ${list.clusterQueue})`;
  $("pending-summary").textContent =
    `${list.total} pending` +
    (list.items.length < list.total ? `, first ${list.items.length} shown` : "") +
    ` · ${list.admissionsPerHour} admissions/h recently`;
  $("pending").dataset.resourceVersion = list.resourceVersion || "";
  const body = $("pending").tBodies[0];
  body.replaceChildren();
  if (!list.items.length) {
    body.append(el("tr", {}, el("td", { colSpan: 9, class: "empty" }, "Nothing pending.")));
  }
  for (const item of list.items) {
    const wait = item.estimatedWait;
    const why = item.whyPending;
    body.append(
      el(
        "tr",
        {
          "data-testid": "pending-row",
          "data-namespace": item.namespace,
          "data-name": item.name,
          "data-pos-cq": item.positionInClusterQueue,
          "data-pos-lq": item.positionInLocalQueue,
        },
        el("td", { class: "num" }, item.positionInClusterQueue),
        el("td", { class: "num" }, item.positionInLocalQueue),
        el("td", {}, item.name, el("div", { class: "sub" }, item.namespace)),
        el("td", {}, item.localQueue),
        el("td", { class: "num" }, item.priority),
        el("td", {}, age(item.creationTimestamp)),
        el(
          "td",
          { class: "wait", title: wait ? `${wait.admissionsPerHour} admissions/h, from ${wait.effectiveAdmissions} recent admissions` : "" },
          wait ? `~${duration(wait.seconds)}` : "unknown",
          wait ? el("div", { class: "sub" }, `90%: ${duration(wait.lowSeconds)}–${duration(wait.highSeconds)}`) : null,
        ),
        startCell(item.estimatedStart),
        el(
          "td",
          { class: "why", title: why ? why.message : "" },
          why ? el("span", { class: "reason" }, why.reason) : "not tried yet",
          why ? why.blockers.map(blockerText).join("; ") : "",
        ),
      ),
    );
  }
}

// -- polling --------------------------------------------------------------------------------

function overviewUrl() {
  return state.namespace ? `${API}/overview?namespace=${encodeURIComponent(state.namespace)}` : `${API}/overview`;
}

function showMessage(text) {
  const box = $("message");
  box.hidden = !text;
  box.textContent = text || "";
}

function explain(error) {
  if (error.code === 401) {
    return (
      "You are not authenticated. Present a client certificate of this server's CA " +
      "(see docs/dashboard.md: `queuescope certs browser`) and reload."
    );
  }
  if (error.code === 403) return `Forbidden: ${error.message}`;
  return `The server answered ${error.code || "nothing"}: ${error.message}`;
}

async function poll() {
  let changed = false;
  try {
    const [overview, c1] = await getJSON(overviewUrl());
    state.overview = overview;
    changed = c1;
    if (state.selected) {
      const [pending, c2] = await getJSON(pendingUrl(state.selected));
      state.pending = pending;
      changed = changed || c2;
    }
    showMessage("");
    state.lastOk = new Date();
  } catch (error) {
    showMessage(explain(error));
    if (error.code === 404 && state.selected) state.selected = null;
  }
  if (changed) state.updates += 1;
  render();
}

function render() {
  const o = state.overview;
  if (o) {
    $("who").textContent = `signed in as ${o.user.name}`;
    renderTree(o);
    renderLocalQueues(o);
  }
  renderPending(state.selected ? state.pending : null);
  const status = $("status");
  status.dataset.updates = String(state.updates);
  status.textContent = document.hidden
    ? "paused (tab hidden)"
    : state.lastOk
      ? `updated ${state.lastOk.toLocaleTimeString()}`
      : "waiting for the server…";
}

function schedule() {
  clearTimeout(state.timer);
  state.timer = null;
  if (document.hidden) {
    render();
    return;
  }
  state.timer = setTimeout(async () => {
    await poll();
    schedule();
  }, POLL_MS);
}

function saveLocation() {
  const params = new URLSearchParams();
  if (state.namespace) params.set("namespace", state.namespace);
  const s = state.selected;
  if (s && s.kind === "cq") params.set("clusterQueue", s.name);
  if (s && s.kind === "lq") params.set("localQueue", `${s.namespace}/${s.name}`);
  const query = params.toString();
  history.replaceState(null, "", query ? `?${query}` : location.pathname);
}

async function select(selection) {
  state.selected = selection;
  state.pending = null;
  saveLocation();
  await poll();
  schedule();
}

function start() {
  const params = new URLSearchParams(location.search);
  state.namespace = params.get("namespace") || "";
  $("namespace").value = state.namespace;
  const cq = params.get("clusterQueue");
  const lq = params.get("localQueue");
  if (cq) state.selected = { kind: "cq", name: cq };
  else if (lq && lq.includes("/")) {
    const [namespace, name] = lq.split("/", 2);
    state.selected = { kind: "lq", namespace, name };
  }
  $("namespace-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    state.namespace = $("namespace").value.trim();
    saveLocation();
    await poll();
    schedule();
  });
  document.addEventListener("visibilitychange", async () => {
    if (!document.hidden) await poll();
    schedule();
  });
  poll().then(schedule);
}

start();
