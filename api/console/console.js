// stratum console: a read-only view of the control plane's API.
// Plain JavaScript, no dependencies, no network but this origin. Every
// value from the API reaches the page through textContent or
// setAttribute, never as markup.
"use strict";

const TOKEN_KEY = "stratum.token";

// The in-memory copy, for a browser whose sessionStorage refuses us.
let memoryToken = null;
const tokenStore = {
  get() {
    try { return sessionStorage.getItem(TOKEN_KEY); } catch { return memoryToken; }
  },
  set(t) {
    memoryToken = t;
    try { sessionStorage.setItem(TOKEN_KEY, t); } catch { /* kept in memory */ }
  },
  clear() {
    memoryToken = null;
    try { sessionStorage.removeItem(TOKEN_KEY); } catch { /* nothing kept */ }
  },
};

// 1. A token handed over in the fragment (#token=...) moves into session
// storage and out of the address bar before anything is requested. The
// fragment may name the view to open too (#token=...&view=audit).
let initialView = null;
(function takeTokenFromFragment() {
  const hash = location.hash.slice(1);
  if (!hash) return;
  const parts = hash.split("&");
  const part = parts.find((p) => p.startsWith("token="));
  if (part === undefined) return;
  const view = parts.find((p) => p.startsWith("view="));
  if (view) initialView = view.slice("view=".length);
  let t = part.slice("token=".length);
  try { t = decodeURIComponent(t); } catch { /* keep it as written */ }
  if (t) tokenStore.set(t);
  history.replaceState(history.state, "", location.pathname + location.search);
})();

// ---------------------------------------------------------------- helpers

const $ = (id) => document.getElementById(id);

/**
 * Characters that change how text reads rather than what it says: C0 and
 * C1 controls but tab and line feed, the bidirectional marks, embeddings,
 * overrides and isolates, and invisible format characters. The service
 * refuses them; an older record may hold them, and the console shows them
 * as visible escapes, never obeys them.
 */
const HIDDEN = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u00AD\u061C\u180E\u200B\u200E\u200F\u2028-\u202E\u2060-\u2064\u2066-\u206F\uFEFF\uFFF9-\uFFFB]|\uDB40[\uDC00-\uDC7F]/g;
const visible = (s) => s.replace(HIDDEN, (c) =>
  [...c].map((u) => "\\u" + u.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")).join(""));

/** An element with attributes and children; strings become text nodes. */
function el(tag, attrs, ...kids) {
  const n = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") n.className = v;
      else if (k.startsWith("on") && typeof v === "function") n.addEventListener(k.slice(2), v);
      else n.setAttribute(k, v === true ? "" : visible(String(v)));
    }
  }
  for (const k of kids.flat(Infinity)) {
    if (k === undefined || k === null || k === false) continue;
    n.append(k instanceof Node ? k : visible(String(k)));
  }
  return n;
}

const dash = "–";
const text = (v) => (v === undefined || v === null || v === "" ? dash : String(v));

function badge(value, title) {
  return el("span", { class: "badge", "data-badge": value ?? "", title }, text(value));
}

/** A time as RFC 3339, a little easier to read, in a <time> element. */
function time(v) {
  if (!v) return dash;
  return el("time", { datetime: v }, String(v).replace("T", " "));
}

function list(items, render = (x) => x) {
  if (!items || items.length === 0) return dash;
  return items.map(render).join(", ");
}

async function mapLimit(items, limit, fn) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

// ---------------------------------------------------------------- the API

class ApiError extends Error {
  constructor(status, body) {
    // The one error shape: {code, message, requestId, fieldErrors?,
    // issues?, details?} (api/src/error.rs). An {error: {...}} wrapper is
    // read too.
    const e = body && typeof body === "object"
      ? (body.error && typeof body.error === "object" ? body.error : body)
      : {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || `HTTP_${status}`;
    this.requestId = e.requestId || null;
    this.fieldErrors = Array.isArray(e.fieldErrors) ? e.fieldErrors
      : Array.isArray(e.fields) ? e.fields : [];
    this.details = e.details || null;
  }

  /** code: message (field: why; ...) [request id] */
  describe() {
    let s = `${this.code}: ${this.message}`;
    if (this.fieldErrors.length) {
      s += " (" + this.fieldErrors
        .map((f) => (f.field ? `${f.field}: ${f.message}` : f.message))
        .join("; ") + ")";
    }
    if (this.requestId) s += ` [request ${this.requestId}]`;
    return s;
  }
}

function authHeaders(extra, token = state.token) {
  return Object.assign({ Authorization: `Bearer ${token}` }, extra);
}

function urlOf(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

/** GET a JSON answer; throws ApiError for any answer but 2xx. */
async function api(path, params) {
  const token = state.token;
  const res = await fetch(urlOf(path, params), {
    headers: authHeaders({ Accept: "application/json" }, token),
    cache: "no-store",
    credentials: "same-origin",
  });
  if (res.ok) return res.json();
  let body = null;
  try { body = await res.json(); } catch { /* not JSON */ }
  const err = new ApiError(res.status, body);
  if (res.status === 401) unauthenticated(err, token);
  throw err;
}

// ---------------------------------------------------------------- state

const state = {
  token: tokenStore.get(),
  // null when live; else {position, label}
  asOf: null,
  head: null, // the log's last position we know of
  loadedOnce: false,
};

/** The asOf query parameter of the views that take it. */
const asOfParam = () => (state.asOf ? state.asOf.position : undefined);

function setHead(p) {
  if (typeof p === "number" && (state.head === null || p > state.head)) state.head = p;
  $("header-position").textContent = text(state.head);
}

// ---------------------------------------------------------------- views

// Each view: load() fetches (and may throw ApiError), render(data) draws.
// A view whose GET is refused says so in its own section.
const views = {};

function defineView(name, load, render) {
  const section = $(name);
  views[name] = {
    name, load, render, seq: 0,
    section,
    status: section.querySelector("[data-status]"),
    body: section.querySelector("[data-body]"),
  };
}

function setStatus(v, message, kind) {
  v.status.hidden = !message;
  v.status.textContent = message || "";
  v.status.dataset.kind = kind || "";
}

async function runView(name) {
  const v = views[name];
  const seq = ++v.seq;
  if (!v.loaded) setStatus(v, "loading…", "loading");
  try {
    const data = await v.load();
    if (seq !== v.seq) return;
    v.render(data);
    v.loaded = true;
    v.body.hidden = false;
    setStatus(v, "");
  } catch (e) {
    if (seq !== v.seq) return;
    const err = e instanceof ApiError ? e : null;
    if (err && err.status === 403) {
      v.render(null);
      v.body.hidden = true;
      setStatus(v, `not allowed by your token's policies: ${err.message}`, "denied");
    } else if (err && err.status === 401) {
      setStatus(v, `signed out: ${err.describe()}`, "error");
    } else {
      setStatus(v, err ? err.describe() : `failed: ${e && e.message ? e.message : e}`, "error");
    }
  }
}

// --- members

async function fetchAll(path, params) {
  // Lists page as {items, nextCursor}; ?cursor= continues (extract.rs page_of).
  const items = [];
  let cursor = null;
  for (let pages = 0; pages < 10000; pages++) {
    const page = await api(path, Object.assign({}, params, { limit: 1000, cursor }));
    items.push(...(page.items || []));
    cursor = page.nextCursor || null;
    if (!cursor) break;
  }
  return items;
}

/**
 * Text from the record, isolated: whatever direction controls it holds
 * cannot reorder the console's own words around it (Unicode bidi
 * isolation; the service refuses such characters, but old records may
 * hold them).
 */
const iso = (v) => el("bdi", null, text(v));

function memberNotes(m) {
  const notes = [];
  if (m.state === "joining" && m.joinStep) notes.push(["at ", iso(m.joinStep)]);
  if (m.failedStep || m.failedError) notes.push(["join failed at ", iso(m.failedStep), ": ", iso(m.failedError)]);
  if (m.decommissionReason) {
    notes.push(["decommissioned: ", iso(m.decommissionReason), m.decommissionedBy ? [" (by ", iso(m.decommissionedBy), ")"] : null]);
  }
  if (m.raftCleanupPending && m.raftCleanupPending.length) notes.push(`raft cleanup pending: ${m.raftCleanupPending.join(", ")}`);
  if (m.raftsRecordedOnly && m.raftsRecordedOnly.length) {
    notes.push(`removal recorded only, no raft called (record-only adapter): ${m.raftsRecordedOnly.join(", ")}`);
  }
  return notes.flatMap((n, i) => (i ? ["; ", n] : [n]));
}

defineView("members",
  () => fetchAll("/v1/admin/cluster/members", { asOf: asOfParam() }),
  (members) => {
    const rows = (members || []).map((m) => el("tr", { "data-node-id": m.nodeId, "data-state": m.state },
      el("td", null, el("strong", null, m.nodeId)),
      el("td", null, badge(m.state)),
      el("td", null, text(m.role)),
      el("td", null, text(m.rack ?? (m.labels && m.labels["topology.rack"]))),
      el("td", { class: "num" }, text(m.ordinal)),
      el("td", { class: "num" }, text(m.appliedGeneration)),
      el("td", null, m.lagging === true ? badge("lagging") : m.lagging === false ? "no" : dash),
      el("td", { class: "notes", title: `${m.mgmtIp} · admitted by ${m.admittedBy} at ${m.admittedAt}` }, memberNotes(m)),
    ));
    $("members-body").replaceChildren(...rows);
    filterMembers();
    if (!members) $("members-count").textContent = "";
  });

function filterMembers() {
  const q = $("members-filter").value.trim().toLowerCase();
  const s = $("members-state").value;
  const rows = $("members-body").rows;
  let shown = 0;
  for (const tr of rows) {
    const ok = (!s || tr.dataset.state === s) && (!q || tr.textContent.toLowerCase().includes(q));
    tr.hidden = !ok;
    if (ok) shown++;
  }
  $("members-count").textContent = rows.length ? `${shown} of ${rows.length}` : "no members";
}

// --- membership

defineView("membership",
  () => api("/v1/admin/cluster/membership", { asOf: asOfParam() }),
  (m) => {
    $("generation").textContent = text(m && m.generation);
    $("digest").textContent = text(m && m.digest);
    $("membership-counts").replaceChildren(...Object.entries((m && m.counts) || {})
      .map(([s, n]) => el("span", { class: "count-pill" }, badge(s), ` ${n}`)));
    $("membership-lagging").textContent = m ? list(m.lagging) : dash;
    if (m) $("header-generation").textContent = text(m.generation);
  });

// --- peers

const PEER_LISTS = ["patroni", "openbao", "ovn", "keepalived", "vmstorage", "alertmanager"];

defineView("peers",
  () => api("/v1/admin/cluster/peers", { asOf: asOfParam() }),
  (p) => {
    $("peers-generation").textContent = text(p && p.generation);
    if (!p) { $("peers-lists").replaceChildren(); return; }
    const names = PEER_LISTS.concat(Object.keys(p).filter((k) => Array.isArray(p[k]) && !PEER_LISTS.includes(k)));
    $("peers-lists").replaceChildren(...names.filter((n) => Array.isArray(p[n])).map((name) => {
      const peers = p[name];
      const prio = peers.some((x) => x.priority !== undefined && x.priority !== null);
      return el("article", { class: "card", "data-peer-list": name },
        el("h3", null, name, el("span", { class: "sub" }, ` ${peers.length}`)),
        peers.length === 0 ? el("p", { class: "empty" }, "no peers") :
          el("table", { class: "grid" },
            el("thead", null, el("tr", null, el("th", null, "node"), el("th", null, "address"), prio && el("th", { class: "num" }, "priority"))),
            el("tbody", null, peers.map((x) => el("tr", { "data-node-id": x.nodeId },
              el("td", null, x.nodeId), el("td", null, el("code", null, x.address)),
              prio && el("td", { class: "num" }, text(x.priority)))))));
    }));
    if (!$("header-generation").textContent || $("header-generation").textContent === dash) {
      $("header-generation").textContent = text(p.generation);
    }
  });

// --- upgrades

const TERMINAL_UPGRADE = new Set(["done", "failed", "canceled"]);

defineView("upgrades",
  async () => {
    const at = asOfParam();
    const listed = await fetchAll("/v1/admin/upgrades", { asOf: at });
    // Each upgrade by id too, with how far it got; the listed record stands
    // in when that GET is refused (a resource policy may deny one).
    return mapLimit(listed, 4, async (u) => {
      try {
        return { record: await api(`/v1/admin/upgrades/${encodeURIComponent(u.id)}`, { asOf: at }) };
      } catch (e) {
        if (e instanceof ApiError && e.status === 401) throw e;
        return { record: u, error: e };
      }
    });
  },
  (all) => {
    all = all || [];
    const active = all.filter((x) => !TERMINAL_UPGRADE.has(x.record.state));
    const past = all.filter((x) => TERMINAL_UPGRADE.has(x.record.state)).reverse();
    $("upgrades-active").replaceChildren(...(active.length ? active.map((x) => upgradeCard(x, true))
      : [el("p", { class: "empty" }, "no active upgrade")]));
    $("upgrades-past").replaceChildren(...(past.length ? past.map((x) => upgradeCard(x, false))
      : [el("p", { class: "empty" }, "no past upgrades")]));
  });

function upgradeCard({ record: u, error }, open) {
  const plan = u.plan || {};
  const head = [
    el("strong", { class: "upgrade-id" }, u.id), " ", badge(u.state), " ",
    el("span", null, `${text(u.fromRelease)} → ${text(u.targetRelease)}`),
    el("span", { class: "sub" }, ` ${text(u.mode)}${u.kind ? " · " + u.kind : ""}`),
    u.writeFreeze ? [" ", badge("write freeze")] : null,
    u.rollbackOf ? el("span", { class: "sub" }, ` rollback of ${u.rollbackOf}`) : null,
  ];
  const body = [
    error ? el("p", { class: "view-status", "data-kind": error.status === 403 ? "denied" : "error" },
      error.status === 403 ? `not allowed by your token's policies: ${error.message}` : (error.describe ? error.describe() : String(error)),
      " (shown as listed)") : null,
    u.waitingFor ? el("p", { class: "waiting" }, u.waitingFor) : null,
    u.failureReason ? el("p", { class: "failure" }, u.failureReason) : null,
    (u.warnings && u.warnings.length) ? el("ul", { class: "warnings" }, u.warnings.map((w) =>
      el("li", null, badge(w.code), ` ${w.nodeId} since `, time(w.since), ": ", iso(w.message)))) : null,
    plan.summary ? el("p", { class: "summary" }, plan.summary) : null,
    el("dl", { class: "kv compact" },
      el("dt", null, "backup"), el("dd", null, `${text(u.backup && u.backup.location)}${u.backup && u.backup.encrypted ? ", encrypted" : ""}${u.backup && u.backup.bundle ? " · " + u.backup.bundle : ""}`),
      el("dt", null, "created"), el("dd", null, time(u.createdAt), ` by ${text(u.createdBy)}`),
      el("dt", null, "updated"), el("dd", null, time(u.updatedAt), ` · version ${text(u.version)}`),
      u.lastRestartAt ? [el("dt", null, "last restart"), el("dd", null, time(u.lastRestartAt))] : null,
      u.rolledBackBy ? [el("dt", null, "rolled back by"), el("dd", null, u.rolledBackBy)] : null,
      u.canceledAt ? [el("dt", null, "canceled"), el("dd", null, time(u.canceledAt), ` by ${text(u.canceledBy)}`)] : null,
      u.acknowledgedAt ? [el("dt", null, "acknowledged"), el("dd", null, time(u.acknowledgedAt))] : null,
    ),
    nodesTable(u.nodes || []),
    (plan.prechecks && plan.prechecks.length) ? el("details", { class: "more" },
      el("summary", null, `prechecks (${plan.prechecks.filter((c) => c.status !== "pass").length} failed of ${plan.prechecks.length})`),
      el("table", { class: "grid" }, el("tbody", null, plan.prechecks.map((c) =>
        el("tr", null, el("td", null, c.name), el("td", null, badge(c.status)), el("td", null, iso(c.message))))))) : null,
    (plan.componentChanges && plan.componentChanges.length) ? el("details", { class: "more" },
      el("summary", null, `component changes (${plan.componentChanges.length})`),
      el("table", { class: "grid" }, el("tbody", null, plan.componentChanges.map((c) =>
        el("tr", null, el("td", null, c.kind), el("td", null, c.name), el("td", null, text(c.from)), el("td", null, "→"), el("td", null, text(c.to))))))) : null,
  ];
  return el("details", { class: "upgrade", "data-upgrade-id": u.id, "data-state": u.state, open: open || undefined },
    el("summary", null, head), el("div", { class: "upgrade-body" }, body));
}

function nodesTable(nodes) {
  if (!nodes.length) return el("p", { class: "empty" }, "no nodes");
  return el("table", { class: "grid nodes" },
    el("thead", null, el("tr", null, ["node", "kind", "phase", "state", "reboot", "host state", "host steps", "message", "rebooted at"]
      .map((h) => el("th", null, h)))),
    el("tbody", null, nodes.map((n) => el("tr", { "data-node-id": n.nodeId },
      el("td", null, el("strong", null, n.nodeId)),
      el("td", null, text(n.kind)),
      el("td", null, text(n.phase)),
      el("td", null, badge(n.state)),
      el("td", null, text(n.rebootMode)),
      el("td", null, text(n.hostState)),
      el("td", null, (n.hostSteps && n.hostSteps.length) ? el("ol", { class: "steps" }, n.hostSteps.map(hostStep)) : dash),
      el("td", { class: "notes" }, iso(n.message)),
      el("td", null, time(n.rebootedAt)),
    ))));
}

function hostStep(s) {
  const extra = [];
  if (s.detail) extra.push(s.detail);
  if (s.pendingUnits && s.pendingUnits.length) extra.push(`pending: ${s.pendingUnits.join(", ")}`);
  if (s.restartedUnits && s.restartedUnits.length) extra.push(`restarted: ${s.restartedUnits.join(", ")}`);
  if (s.stoppedUnits && s.stoppedUnits.length) extra.push(`stopped: ${s.stoppedUnits.join(", ")}`);
  if (s.switchedSysexts && s.switchedSysexts.length) extra.push(`sysexts: ${s.switchedSysexts.join(", ")}`);
  return el("li", { title: s.rebootMode ? `reboot mode ${s.rebootMode}` : undefined },
    `${s.name} `, badge(s.state), extra.length ? el("span", { class: "sub" }, ` ${extra.join(" · ")}`) : null);
}

// --- alarms

defineView("alarms",
  () => fetchAll("/v1/admin/alarms", { active: $("alarms-active").checked ? "true" : undefined, asOf: asOfParam() }),
  (alarms) => {
    alarms = alarms || [];
    $("alarms-count").textContent = alarms.length
      ? `${alarms.filter((a) => !a.clearedAt).length} active of ${alarms.length}` : "";
    $("alarms-body").replaceChildren(...(alarms.length ? alarms.map((a) => el("tr", { "data-alarm": a.name },
      el("td", null, el("strong", null, a.name)),
      el("td", null, badge(a.clearedAt ? "cleared" : "raised")),
      el("td", null, text(a.nodeId)),
      el("td", null, text(a.upgradeId)),
      el("td", null, time(a.raisedAt)),
      el("td", null, time(a.clearedAt)),
      el("td", { class: "notes" }, iso(a.message)),
    )) : [el("tr", null, el("td", { colspan: 7, class: "empty" }, "no alarms"))]));
  });

// --- replicas

defineView("replicas",
  () => api("/v1/admin/replicas", {}),
  (answer) => {
    const replicas = (answer && answer.items) || [];
    const storage = (answer && answer.storage) || {};
    const agreed = (answer && answer.agreed) || {};
    const alarms = (answer && answer.alarms) || [];
    const digests = new Set(replicas.filter((r) => r.state === "live").map((r) => r.settingsDigest));
    $("replicas-count").textContent = replicas.length
      ? `${replicas.filter((r) => r.state === "live").length} live of ${replicas.length}`
        + (digests.size > 1 ? `; ${digests.size} different settings among the live` : "") : "";
    const finalized = storage.finalized
      ? ` finalized at position ${storage.finalized.position} by ${storage.finalized.by}` : " never finalized";
    const pending = (storage.pending || []).map((p) => `; level ${p.level} waits for stratum replicas finalize (${p.summary})`).join("");
    $("replicas-storage").replaceChildren(
      text(`storage level ${storage.level ?? "?"} of ${storage.newestLevel ?? "?"},${finalized}${pending}`));
    $("replicas-agreed").replaceChildren(
      "agreed settings ", el("bdi", null, text((agreed.digest || "").slice(0, 12))), " (", iso(agreed.by), ")");
    $("replicas-alarms").replaceChildren(...alarms.map((a) => el("li", { "data-alarm": a.name },
      el("strong", null, a.name), ": ", iso(a.message))));
    $("replicas-body").replaceChildren(...(replicas.length ? replicas.map((r) => el("tr", { "data-replica": r.id },
      el("td", null, el("strong", null, r.id), r.this ? " (this one)" : ""),
      el("td", null, badge(r.state)),
      el("td", null, text(r.host)),
      el("td", null, text(r.listen)),
      el("td", null, text(`${r.version} ${r.commit}`)),
      el("td", { title: JSON.stringify(r.settings) }, text(r.settingsDigest.slice(0, 12)),
        r.settingsDigest === agreed.digest ? " (agreed)" : el("strong", null, " (differs)")),
      el("td", null, time(r.startedAt)),
      el("td", null, time(r.heartbeatAt)),
    )) : [el("tr", null, el("td", { colspan: 8, class: "empty" }, "no replicas"))]));
  });

// --- audit

const EVENT_TYPES = [
  "MemberAdmitted", "JoinProgressReported", "MemberJoinCompleted", "MemberJoinFailed", "RaftPeerRemoved",
  "RaftCleanupCompleted", "RaftPeerReturned", "MemberJoinRetried", "MemberRemovalStarted", "MemberDecommissioned", "MemberUpdated",
  "AppliedGenerationReported", "JoinRequested", "JoinRequestApproved", "JoinRequestRejected", "TokenIssued",
  "ReleaseRegistered", "RunningReleaseSet", "UpgradePlanned", "UpgradeStateChanged", "UpgradePrechecked",
  "UpgradeNodeTurnStarted", "UpgradeNodeReported", "UpgradeBackupReported", "UpgradeFailed", "UpgradeCompleted",
  "UpgradeCanceled", "UpgradeRolledBack", "UpgradeAcknowledged", "TokenRevoked", "PolicyCreated",
  "PrincipalPoliciesSet", "ResourcePolicySet", "NodeFactsReported", "AlarmRaised", "AlarmCleared",
  "StorageVersionFinalized",
];
const DECOMMISSION_TYPE = "MemberDecommissioned";
const PAGE = 1000; // events per page (the most the route gives)
const MAX_ROWS = 2000; // timeline rows kept in the page
const audit = { window: PAGE, seen: { streams: new Set(), types: new Set(EVENT_TYPES), actors: new Set() } };

const isDecommission = (e) => typeof e.type === "string" && e.type.includes("Decommission");

function auditFilters() {
  return {
    stream: $("audit-stream").value.trim(),
    type: $("audit-type").value.trim(),
    actor: $("audit-actor").value.trim(),
  };
}

/** What the server's own filters keep (exact matches, events.rs). */
function matchesFilters(e, f) {
  return (!f.stream || e.streamId === f.stream) && (!f.type || e.type === f.type) &&
    (!f.actor || e.principal === f.actor || e.initiator === f.actor);
}

/** Why it happened: the payload's reason, or a join failure's error; what
 * a raft's removal or a removed peer's return was. */
function whyOf(e) {
  const p = e.payload || {};
  if (e.type === "RaftPeerReturned") {
    return [`back in the ${p.raft} raft after its removal at position ${p.removedPosition} (`, iso(p.removedAt), "); removed again"];
  }
  if (e.type === "RaftPeerRemoved") {
    return `out of the ${p.raft} raft (${p.adapter}${p.alreadyGone ? ", already gone" : ""}${p.leaderMoved ? ", leadership moved first" : ""})`;
  }
  if (typeof p.reason === "string" && p.reason) return iso(p.reason);
  if (typeof p.error === "string" && p.error) return p.step ? [iso(p.step), ": ", iso(p.error)] : iso(p.error);
  if (typeof p.message === "string" && p.message) return iso(p.message);
  return "";
}

/** Who did it: the initiator, and the service when it acted for them. */
function byOf(e) {
  const who = e.initiator || e.principal;
  return who && e.principal && who !== e.principal ? [iso(who), " (via ", iso(e.principal), ")"] : iso(who);
}

/** The log's head as /readyz says it (no token needed), or null. */
async function readyHead() {
  try {
    // /readyz needs no token: none is sent.
    const res = await fetch("/readyz", { cache: "no-store" });
    if (!res.ok) return null;
    const body = await res.json();
    return typeof body.position === "number" ? body.position : null;
  } catch { return null; }
}

/**
 * Pages GET /v1/admin/events from `after` up to `cap` (inclusive, or the
 * head). A page covers up to `limit` positions, fewer events when
 * filtered; `nextAfter` is where the next starts. The log has no gaps, so
 * a page covering fewer positions than asked is the last.
 */
async function scanEvents(filters, after, cap) {
  const events = [];
  let truncated = false;
  let cut = false;
  for (let pages = 0; ; pages++) {
    if (pages >= 500) { truncated = true; break; }
    const page = await api("/v1/admin/events", Object.assign({}, filters, { after, limit: PAGE }));
    for (const e of page.events || []) {
      if (cap !== null && e.position > cap) break;
      events.push(e);
    }
    if (events.length > 2 * MAX_ROWS) {
      // Bounded: every decommission, and the newest of the rest.
      const rest = events.filter((e) => !isDecommission(e));
      const dropped = new Set(rest.slice(0, rest.length - MAX_ROWS));
      const kept = events.filter((e) => !dropped.has(e));
      events.length = 0;
      events.push(...kept);
      cut = true;
    }
    const next = typeof page.nextAfter === "number" ? page.nextAfter : after;
    const done = next <= after || next - after < PAGE || (cap !== null && next >= cap);
    after = cap !== null ? Math.min(next, cap) : next;
    if (done) break;
  }
  return { events, next: after, truncated, cut };
}

defineView("audit",
  async () => {
    const f = auditFilters();
    const cap = state.asOf ? state.asOf.position : null;
    let head = await readyHead();
    if (cap !== null) head = head === null ? cap : Math.min(head, cap);
    const filtered = Boolean(f.stream || f.type || f.actor);
    // Unfiltered: the newest positions only (more on request); filtered:
    // the whole log, which the server filters.
    const start = filtered || head === null ? 0 : Math.max(0, head - audit.window);
    const timeline = await scanEvents(f, start, cap);
    let decommissions = timeline.events.filter(isDecommission);
    if (start > 0 && (!f.type || f.type === DECOMMISSION_TYPE)) {
      // Decommissions come from the whole log, however old.
      const earlier = await scanEvents(Object.assign({}, f, { type: DECOMMISSION_TYPE }), 0, start);
      decommissions = earlier.events.concat(decommissions);
    }
    return { f, start, timeline, decommissions, head: Math.max(head ?? 0, timeline.next) };
  },
  (d) => {
    if (!d) {
      $("audit-decommissions").replaceChildren();
      $("audit-timeline").replaceChildren();
      $("audit-range").textContent = "";
      return;
    }
    const rest = d.timeline.events.filter((e) => !isDecommission(e));
    $("audit-decommissions").replaceChildren(...(d.decommissions.length
      ? d.decommissions.slice().reverse().map(auditRow)
      : [emptyRow("no decommissions")]));
    $("audit-timeline").replaceChildren(...(rest.length
      ? rest.slice(-MAX_ROWS).reverse().map(auditRow)
      : [emptyRow("no events")]));
    for (const e of d.timeline.events.concat(d.decommissions)) noteSeen(e);
    fillDatalists();
    $("audit-range").textContent = (d.timeline.next > d.start ? `positions ${d.start + 1}–${d.timeline.next}` : "no events yet") +
      (rest.length > MAX_ROWS || d.timeline.cut ? ` (the newest ${MAX_ROWS} shown)` : "") +
      (d.timeline.truncated ? " (stopped early: narrow the filters)" : "");
    $("audit-older").hidden = d.start === 0;
    if (!state.asOf) {
      setHead(d.head);
      live.lastId = Math.max(live.lastId ?? 0, d.timeline.next);
    }
  });

function emptyRow(msg) {
  return el("tr", { "data-empty": true }, el("td", { colspan: 7, class: "empty" }, msg));
}

function auditRow(e) {
  const why = whyOf(e);
  const details = el("details", { class: "payload" }, el("summary", null, "payload"));
  details.addEventListener("toggle", () => {
    if (details.open && details.childElementCount === 1) {
      const meta = { eventId: e.eventId, streamVersion: e.streamVersion, schemaVersion: e.schemaVersion,
        requestId: e.requestId, clientRequestId: e.clientRequestId, causation: e.causation,
        correlation: e.correlation, hash: e.hash, prevHash: e.prevHash };
      details.append(el("pre", null, JSON.stringify({ payload: e.payload, ...meta }, null, 2)));
    }
  }, { once: false });
  return el("tr", { "data-audit-entry": true, "data-position": e.position, "data-type": e.type },
    el("td", { class: "num" }, text(e.position)),
    el("td", { class: "nowrap" }, time(e.occurredAt)),
    el("td", null, el("span", { class: "etype", "data-type": e.type }, text(e.type))),
    el("td", null, el("code", null, text(e.streamId))),
    el("td", { "data-by": e.initiator || e.principal }, byOf(e)),
    el("td", { class: "why" }, why || dash),
    el("td", null, details));
}

function noteSeen(e) {
  if (e.streamId) audit.seen.streams.add(e.streamId);
  if (e.type) audit.seen.types.add(e.type);
  if (e.principal) audit.seen.actors.add(e.principal);
  if (e.initiator) audit.seen.actors.add(e.initiator);
}

function fillDatalists() {
  const fill = (id, set) => $(id).replaceChildren(...[...set].sort().slice(0, 500).map((v) => el("option", { value: v })));
  fill("audit-streams", audit.seen.streams);
  fill("audit-types", audit.seen.types);
  fill("audit-actors", audit.seen.actors);
}

/** An event from the stream: on top of its list, if the filters keep it. */
function prependEvent(e) {
  noteSeen(e);
  if (!views.audit.loaded || !matchesFilters(e, auditFilters())) return;
  const body = isDecommission(e) ? $("audit-decommissions") : $("audit-timeline");
  if (body.querySelector(`tr[data-position="${Number(e.position)}"]`)) return;
  const empty = body.querySelector("tr[data-empty]");
  if (empty) empty.remove();
  body.prepend(auditRow(e));
  while (body.rows.length > MAX_ROWS) body.lastElementChild.remove();
  const range = $("audit-range");
  range.textContent = range.textContent.replace(/–\d+/, `–${e.position}`);
}

// ---------------------------------------------------------------- live

const live = { ctrl: null, lastId: null, backoff: 1000, timer: null, wanted: false };

function setLive(s, title) {
  const n = $("live");
  n.textContent = s;
  n.dataset.state = s;
  n.title = title || "live updates from the event stream";
}

function startLive() {
  if (state.asOf || !state.token) { setLive("paused", state.asOf ? "paused while asOf is set" : undefined); return; }
  if (live.wanted) return;
  live.wanted = true;
  live.backoff = 1000;
  connect();
}

function stopLive(title) {
  live.wanted = false;
  clearTimeout(live.timer);
  live.timer = null;
  if (live.ctrl) live.ctrl.abort();
  live.ctrl = null;
  setLive("paused", title);
}

/** An SSE parser: feed it text, it calls onEvent({id, event, data}). */
function sseParser(onEvent) {
  let buf = "";
  let data = [];
  let event = "";
  let id = null;
  const line = (l) => {
    if (l === "") {
      if (data.length) onEvent({ id, event: event || "message", data: data.join("\n") });
      data = [];
      event = "";
      return;
    }
    if (l.startsWith(":")) return; // a comment: the keep-alive
    const c = l.indexOf(":");
    const field = c < 0 ? l : l.slice(0, c);
    let value = c < 0 ? "" : l.slice(c + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    else if (field === "event") event = value;
    else if (field === "id" && !value.includes("\0")) id = value;
  };
  // A trailing \r may be the first half of \r\n: it waits for the next chunk.
  const eol = /\r\n|\r(?!$)|\n/g;
  return (chunk) => {
    buf += chunk;
    let start = 0;
    eol.lastIndex = 0;
    for (let m = eol.exec(buf); m; m = eol.exec(buf)) {
      line(buf.slice(start, m.index));
      start = eol.lastIndex;
    }
    buf = buf.slice(start);
  };
}

async function connect() {
  const ctrl = new AbortController();
  live.ctrl = ctrl;
  const token = state.token;
  const headers = authHeaders({ Accept: "text/event-stream" }, token);
  if (live.lastId !== null) headers["Last-Event-ID"] = String(live.lastId);
  try {
    const res = await fetch(urlOf("/v1/admin/events/stream", { after: live.lastId ?? undefined }), {
      headers, cache: "no-store", credentials: "same-origin", signal: ctrl.signal,
    });
    if (!res.ok) {
      let body = null;
      try { body = await res.json(); } catch { /* not JSON */ }
      const err = new ApiError(res.status, body);
      if (res.status === 401) { unauthenticated(err, token); return; }
      if (res.status === 403) {
        live.wanted = false;
        setLive("paused", `not allowed by your token's policies: ${err.message}`);
        return;
      }
      throw err;
    }
    setLive("live");
    live.backoff = 1000;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    const feed = sseParser(onStreamEvent);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      feed(decoder.decode(value, { stream: true }));
    }
    throw new Error("the stream ended");
  } catch (e) {
    if (ctrl.signal.aborted || !live.wanted || live.ctrl !== ctrl) return;
    const wait = Math.round(live.backoff * (0.75 + Math.random() * 0.5));
    live.backoff = Math.min(live.backoff * 2, 30000);
    setLive("reconnecting", `${e && e.describe ? e.describe() : (e && e.message) || e}; again in ${Math.round(wait / 1000)} s`);
    live.timer = setTimeout(() => { if (live.wanted) connect(); }, wait);
  }
}

function onStreamEvent(frame) {
  const position = Number(frame.id);
  if (Number.isFinite(position)) {
    live.lastId = position;
    setHead(position);
  }
  let e = null;
  try { e = JSON.parse(frame.data); } catch { /* not an event */ }
  if (e && typeof e.position === "number") prependEvent(e);
  scheduleRefresh();
}

// Refreshes after events: once things are quiet for 300 ms, or at least
// every 2 s while they are not; never two at once.
const refresh = { timer: null, since: 0, running: false, again: false };

function scheduleRefresh() {
  const now = Date.now();
  if (!refresh.timer) refresh.since = now;
  clearTimeout(refresh.timer);
  const wait = Math.max(0, Math.min(300, refresh.since + 2000 - now));
  refresh.timer = setTimeout(runRefresh, wait);
}

async function runRefresh() {
  refresh.timer = null;
  if (refresh.running) { refresh.again = true; return; }
  refresh.running = true;
  try {
    await Promise.all(["members", "membership", "peers", "upgrades", "alarms"].map(runView));
  } finally {
    refresh.running = false;
    if (refresh.again) { refresh.again = false; scheduleRefresh(); }
  }
}

// ---------------------------------------------------------------- asOf

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * asOf takes a log position (extract.rs as_of). A time is turned into
 * the position of the last event before it: the event list's `from`
 * finds the first event at or after it.
 */
async function resolveAsOf(raw) {
  if (/^\d+$/.test(raw)) return { position: Number(raw), label: `log position ${raw}` };
  if (!RFC3339.test(raw) || Number.isNaN(Date.parse(raw))) {
    throw new Error("asOf is a log position (a whole number) or an RFC 3339 time such as 2026-11-30T12:00:00Z");
  }
  const from = new Date(raw).toISOString();
  let after = 0;
  for (let pages = 0; pages < 10000; pages++) {
    const page = await api("/v1/admin/events", { from, after, limit: PAGE });
    if (page.events && page.events.length) {
      const p = page.events[0].position - 1;
      return { position: p, label: `log position ${p}, the last before ${from}` };
    }
    const next = typeof page.nextAfter === "number" ? page.nextAfter : after;
    if (next <= after || next - after < PAGE) {
      return { position: next, label: `log position ${next}, the head (nothing happened at or after ${from})` };
    }
    after = next;
  }
  throw new Error("the log is too long to search for that time");
}

async function applyAsOf(raw) {
  const input = $("as-of");
  input.setCustomValidity("");
  raw = (raw || "").trim();
  let next = null;
  if (raw) {
    try {
      next = await resolveAsOf(raw);
    } catch (e) {
      const msg = e instanceof ApiError ? (e.status === 403 ? `not allowed by your token's policies: ${e.message}` : e.describe()) : e.message;
      input.setCustomValidity(msg);
      input.reportValidity();
      $("asof-text").textContent = `asOf not applied: ${msg}`;
      $("asof-banner").hidden = false;
      $("asof-banner").dataset.kind = "error";
      // The first load goes on, live, whatever the address bar asked for.
      if (!state.loadedOnce) await loadAll();
      return;
    }
  }
  state.asOf = next;
  input.value = raw;
  const url = new URL(location.href);
  if (raw) url.searchParams.set("asOf", raw); else url.searchParams.delete("asOf");
  history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  showAsOfBanner();
  if (state.asOf) stopLive("paused while asOf is set");
  await loadAll();
}

function showAsOfBanner() {
  const b = $("asof-banner");
  b.dataset.kind = "";
  b.hidden = !state.asOf;
  document.body.dataset.asOf = state.asOf ? String(state.asOf.position) : "";
  if (state.asOf) {
    $("asof-text").textContent = `Time travel: showing the state as of ${state.asOf.label}. ` +
      "Live updates are paused. The audit timeline stops at that position.";
  }
}

// ---------------------------------------------------------------- sign-in

function showSignin(message) {
  $("signin").hidden = false;
  $("app").hidden = true;
  $("signout").hidden = true;
  $("signin-message").textContent = message || "";
  $("signin-message").hidden = !message;
  $("token-input").focus();
}

function unauthenticated(err, token) {
  // Only the token in use now: a late answer to an earlier one changes nothing.
  if (!state.token || token !== state.token) return;
  state.token = null;
  tokenStore.clear();
  stopLive();
  showSignin(`Your token was refused: ${err.describe()}. Sign in again.`);
}

function clearViews() {
  for (const v of Object.values(views)) {
    v.seq++;
    v.loaded = false;
    v.render(null);
    setStatus(v, "");
  }
  $("header-generation").textContent = dash;
  $("header-position").textContent = dash;
  state.head = null;
  live.lastId = null;
}

async function loadAll() {
  await Promise.all(Object.keys(views).map(runView));
  if (!state.loadedOnce) {
    state.loadedOnce = true;
    document.body.dataset.loaded = "true";
  }
  if (state.token && !state.asOf && !live.wanted) {
    // The stream starts where the first load ended, never from the log's start.
    if (live.lastId === null) {
      live.lastId = await readyHead();
      setHead(live.lastId);
    }
    startLive();
  }
}

function startApp() {
  $("signin").hidden = true;
  $("app").hidden = false;
  $("signout").hidden = false;
  return loadAll();
}

// ---------------------------------------------------------------- nav

function showView() {
  const name = location.hash.slice(1) || initialView;
  const current = views[name] ? name : "members";
  for (const v of Object.values(views)) v.section.hidden = v.name !== current;
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.view === current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

// ---------------------------------------------------------------- start

function init() {
  showView();
  window.addEventListener("hashchange", showView);

  $("members-filter").addEventListener("input", filterMembers);
  $("members-state").addEventListener("change", filterMembers);
  $("alarms-active").addEventListener("change", () => runView("alarms"));

  $("audit-filters").addEventListener("submit", (ev) => { ev.preventDefault(); runView("audit"); });
  for (const id of ["audit-stream", "audit-type", "audit-actor"]) {
    $(id).addEventListener("change", () => runView("audit"));
  }
  $("audit-reset").addEventListener("click", () => {
    for (const id of ["audit-stream", "audit-type", "audit-actor"]) $(id).value = "";
    audit.window = PAGE;
    runView("audit");
  });
  $("audit-older").addEventListener("click", () => { audit.window += PAGE; runView("audit"); });

  $("as-of-form").addEventListener("submit", (ev) => { ev.preventDefault(); applyAsOf($("as-of").value); });
  $("as-of").addEventListener("input", () => $("as-of").setCustomValidity(""));
  $("asof-clear").addEventListener("click", () => applyAsOf(""));

  $("signin").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = $("token-input").value.trim();
    if (!t) return;
    $("token-input").value = "";
    state.token = t;
    tokenStore.set(t);
    clearViews();
    startApp();
  });
  $("signout").addEventListener("click", () => {
    state.token = null;
    tokenStore.clear();
    stopLive();
    clearViews();
    showSignin("Signed out.");
  });

  if (!state.token) { showSignin(""); return; }
  const raw = new URLSearchParams(location.search).get("asOf");
  if (raw) {
    $("signin").hidden = true;
    $("app").hidden = false;
    $("signout").hidden = false;
    applyAsOf(raw);
  } else {
    startApp();
  }
}

init();
