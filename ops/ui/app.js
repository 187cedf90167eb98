// The admission ledger's dashboard: plain JavaScript, no build step (docs/dashboard.md).
// Reads admitd's /api/* with the bearer token kept for this tab; /api/stream (server-sent
// events, read with fetch so the token goes in a header) says when the ledger grew, and the
// page shown is fetched again, without a reload.
"use strict";
const state = { token: sessionStorage.getItem("admission-token") || "", head: 0, filters: {} };
const el = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

async function api(path) {
  const r = await fetch(path, { headers: { Authorization: "Bearer " + state.token } });
  if (r.status === 401) { showLogin("sign in"); throw new Error("unauthorized"); }
  if (!r.ok) throw new Error(path + ": " + r.status + " " + (await r.text()));
  return r.json();
}

function showLogin(message) {
  el("login").hidden = false;
  el("page").innerHTML = "";
  el("login-error").textContent = message === "sign in" ? "" : message;
}

function bar(used, total) {
  const pct = total > 0 ? Math.min(100, (100 * used) / total) : (used > 0 ? 100 : 0);
  return `<div class="bar" title="${used} of ${total}"><span class="${used > total ? "over" : ""}" style="width:${pct}%"></span></div>`;
}

function table(headers, rows) {
  return `<table><thead><tr>${headers.map((h) => `<th>${esc(h)}</th>`).join("")}</tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

const pages = {
  async overview() {
    const o = await api("/api/overview");
    const pending = Object.entries(o.pendingByReason);
    let html = `<div class="cards">
      <div class="card">Pending<b id="pending-total">${pending.reduce((a, [, n]) => a + n, 0)}</b></div>
      <div class="card">Idle GPUs<b>${o.idleGpus}</b></div>
      <div class="card">Checks waiting<b>${o.checks.reduce((a, c) => a + c.pending, 0)}</b></div>
      <div class="card">Ledger head<b>${o.head.sequence}</b></div></div>`;
    html += "<h2>ClusterQueues</h2>" + table(["ClusterQueue", "cohort", "pending (active / inadmissible)", "reserving", "admitted", "flavor", "resource", "reserved / nominal", "borrowed"],
      o.clusterQueues.flatMap((q) => (q.resources.length ? q.resources : [{}]).map((r, i) => `<tr>
        <td>${i ? "" : esc(q.name)}${q.stopped && !i ? " (stopped)" : ""}</td><td>${i ? "" : esc(q.cohort)}</td>
        <td>${i ? "" : q.pending.active + " / " + q.pending.inadmissible}</td><td>${i ? "" : q.reserving}</td><td>${i ? "" : q.admitted}</td>
        <td>${esc(r.flavor)}</td><td>${esc(r.resource)}</td>
        <td>${r.resource ? bar(r.reserved, r.nominal) + ` ${esc(r.quantities.reserved)} / ${esc(r.quantities.nominal)}` : ""}</td><td>${r.borrowed ? esc(r.quantities.borrowed) : ""}</td></tr>`)));
    html += "<h2>Pending workloads by reason</h2>" + table(["reason", "workloads"], pending.map(([r, n]) => `<tr><td>${esc(r)}</td><td>${n}</td></tr>`));
    html += "<h2>Admission checks</h2>" + checksTable(o.checks);
    if (o.budgets.length) {
      html += `<h2>Budgets (resource-hours, current period)</h2><div id="budgets">` + table(["policy", "scope", "resource", "period", "used + committed / limit", "used", "committed", "remaining"],
        o.budgets.map((b) => `<tr data-budget="${esc(b.policy)}"><td>${esc(b.policy)}</td><td>${esc(b.scope)}</td><td>${esc(b.resource)}</td><td>${esc(b.period)}</td>
          <td>${bar(Number(b.usedHours) + Number(b.committedHours), Number(b.limitHours))} ${esc(b.limitHours)}</td><td>${esc(b.usedHours)}</td><td>${esc(b.committedHours)}</td><td>${esc(b.remainingHours)}</td></tr>`)) + "</div>";
    }
    if (o.topology.length) {
      html += `<h2>Topology (TAS flavors: largest free domain per level)</h2><div id="topology">` + o.topology.map((f) => {
        const p = f.largestPending;
        const wants = p ? `${p.pods} pods${p.perPod ? " x " + esc(p.perPod) + " " + esc(f.resource) : ""}${p.level ? " in one " + esc(p.level) : ""}` : "";
        return `<h3>${esc(f.flavor)} (topology ${esc(f.topology)})</h3><p>largest pending request: ${p ? wants : "none"}</p>` +
          table(["level", "domains", `largest free domain (${esc(f.resource)})`, "domains fitting the largest pending request"],
            f.levels.map((l) => `<tr data-tas-flavor="${esc(f.flavor)}" data-tas-level="${esc(l.level)}"><td>${esc(l.level)}</td><td>${l.domains}</td>
              <td>${l.largestFree}${l.largestDomain ? " (" + esc(l.largestDomain) + ")" : ""}</td><td>${l.fittingLargestPending === null ? "" : l.fittingLargestPending}</td></tr>`));
      }).join("") + "</div>";
    }
    html += "<h2>Recent evictions, preemptions and rejections</h2>" + table(["sequence", "time", "kind", "what"],
      o.recent.map((e) => `<tr><td>${e.sequence}</td><td>${esc(e.time)}</td><td>${esc(e.kind)}</td><td>${esc(e.text)}</td></tr>`));
    return html;
  },
  async workloads() {
    const w = await api("/api/workloads");
    const f = state.filters;
    const values = (k) => [...new Set(w.items.map((i) => i[k]).filter(Boolean))].sort();
    const select = (k, label) => `<label>${label} <select data-filter="${k}"><option value="">all</option>${values(k).map((v) => `<option ${f[k] === v ? "selected" : ""}>${esc(v)}</option>`).join("")}</select></label>`;
    const shown = w.items.filter((i) => ["namespace", "localQueue", "clusterQueue", "state"].every((k) => !f[k] || i[k] === f[k]));
    return `<div class="filters">${select("namespace", "Namespace")}${select("localQueue", "LocalQueue")}${select("clusterQueue", "ClusterQueue")}${select("state", "State")}</div>` +
      table(["namespace", "name", "LocalQueue", "ClusterQueue", "state", "reason", "priority", "position in ClusterQueue", "position in LocalQueue", "admission"],
        shown.map((i) => `<tr data-workload="${esc(i.namespace + "/" + i.name)}"><td>${esc(i.namespace)}</td>
          <td><a href="#explain/${encodeURIComponent(i.namespace + "/" + i.name)}">${esc(i.name)}</a></td>
          <td>${esc(i.localQueue)}</td><td>${esc(i.clusterQueue)}</td><td>${esc(i.state)}</td><td>${esc(i.reason)}</td>
          <td>${i.priority}</td><td>${i.positionInClusterQueue === undefined ? "" : i.positionInClusterQueue + 1}</td><td>${i.positionInLocalQueue === undefined ? "" : i.positionInLocalQueue + 1}</td>
          <td>${esc((i.admission || []).join(", "))}</td></tr>`)) + `<p>${shown.length} of ${w.items.length} workloads</p>`;
  },
  async cohorts() {
    const c = await api("/api/cohorts");
    const byParent = {};
    for (const co of c.cohorts) (byParent[co.spec.parentName || ""] ||= []).push(co);
    const queues = (name) => c.clusterQueues.filter((q) => q.cohort === name);
    const render = (parent) => `<ul class="tree">${(byParent[parent] || []).map((co) => `<li><b>${esc(co.metadata.name)}</b>
      ${table(["flavor", "resource", "usage", "subtree quota"], co.status.resources.map((r) => `<tr><td>${esc(r.flavor)}</td><td>${esc(r.resource)}</td><td>${esc(r.usage)}</td><td>${esc(r.subtreeQuota)}</td></tr>`))}
      <ul class="tree">${queues(co.metadata.name).map((q) => `<li>ClusterQueue ${esc(q.name)}: ${q.resources.filter((r) => r.borrowed > 0).map((r) => `borrows ${r.borrowed} ${esc(r.resource)} of ${esc(r.flavor)}`).join(", ") || "borrows nothing"}</li>`).join("")}</ul>
      ${render(co.metadata.name)}</li>`).join("")}</ul>`;
    const loose = queues("");
    return "<h2>Cohorts</h2>" + (c.cohorts.length ? render("") : "<p>No cohorts.</p>") +
      (loose.length ? `<h2>ClusterQueues without a cohort</h2><ul>${loose.map((q) => `<li>${esc(q.name)}</li>`).join("")}</ul>` : "");
  },
  async checks() {
    return "<h2>Admission checks</h2>" + checksTable(await api("/api/checks"));
  },
  async audit() {
    const a = await api("/api/audit");
    return `<h2>Audit</h2>` + table(["", ""], [
      `<tr><td>head sequence</td><td id="audit-head">${a.head.sequence}</td></tr>`,
      `<tr><td>head hash (SHA-256 chain)</td><td><code>${esc(a.head.hash)}</code></td></tr>`,
      `<tr><td>snapshots</td><td>${esc(a.snapshots.join(", ") || "none")}</td></tr>`,
      `<tr><td>last verify (the hash chain and the idempotency index)</td><td id="last-verify">${esc(a.lastVerify || "not run since the daemon started")}</td></tr>`,
      `<tr><td>last replay (every decision made again and compared)</td><td id="last-replay">${esc(a.lastReplay || "not run since the daemon started")}</td></tr>`]) +
      (a.mayRun ? `<p><button data-audit="verify">Verify now</button> <button data-audit="replay">Replay now</button> <span id="audit-running"></span></p>`
              : "<p>Verify and replay of the whole ledger: an operator's or an auditor's.</p>");
  },
};

function checksTable(checks) {
  return table(["check", "controller", "waiting now", "oldest waiting since", "rejections"],
    checks.map((c) => `<tr><td>${esc(c.name)}</td><td>${esc(c.controller)}</td><td>${c.pending}</td><td>${esc(c.oldestPendingSince || "")}</td><td>${c.rejected}</td></tr>`));
}

// Renders may overlap (a hash change while a live refresh is still fetching): each takes a
// number, and only the newest started writes the page, so a slow stale render never
// replaces the page the user went to.
let renders = 0;
async function show() {
  const mine = ++renders;
  const put = (html) => { if (mine === renders) el("page").innerHTML = html; };
  // #explain/NS/NAME (or NS%2FNAME): the page, then the rest of the path as its argument.
  const [page, ...rest] = (location.hash.slice(1) || "overview").split("/");
  const arg = decodeURIComponent(rest.join("/"));
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === page));
  if (!state.token) { showLogin("sign in"); return; }
  el("login").hidden = true;
  try {
    if (page === "explain") {
      // admitctl explain -o html's page (timeline to scale, history), in a sandboxed frame.
      const r = await fetch("/api/explain?format=html&workload=" + encodeURIComponent(arg),
                            { headers: { Authorization: "Bearer " + state.token } });
      put(r.ok ? `<h2>Timeline of ${esc(arg)}</h2><iframe id="explain" sandbox title="explain ${esc(arg)}" srcdoc="${esc(await r.text())}"></iframe>`
               : `<p class="error">${esc(await r.text())}</p>`);
      return;
    }
    put(await (pages[page] || pages.overview)());
  } catch (e) {
    if (e.message !== "unauthorized") put(`<p class="error">${esc(e.message)}</p>`);
  }
}

// Server-sent events, resumable by sequence: each `head` event names the ledger's new head.
async function follow() {
  for (;;) {
    try {
      const r = await fetch("/api/stream?from=" + (state.head + 1), { headers: { Authorization: "Bearer " + state.token } });
      if (!r.ok) throw new Error(String(r.status));
      el("live").classList.add("on");
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      let timer = null;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = message.split("\n").find((l) => l.startsWith("data: "));
          if (!data) continue;
          const head = JSON.parse(data.slice(6)).sequence;
          el("head").textContent = head;
          if (head !== state.head) {
            state.head = head;
            clearTimeout(timer);
            timer = setTimeout(show, 200);  // debounced: one refresh for a burst of appends
          }
        }
      }
    } catch (e) {
      // reconnect below
    }
    el("live").classList.remove("on");
    await new Promise((res) => setTimeout(res, 1000));
  }
}

document.addEventListener("click", async (e) => {
  const what = e.target.dataset && e.target.dataset.audit;
  if (!what) return;
  el("audit-running").textContent = what + " running...";
  try {
    const r = await fetch("/api/audit/" + what, { method: "POST", headers: { Authorization: "Bearer " + state.token } });
    el("audit-running").textContent = r.ok ? "" : await r.text();
    if (r.ok) show();
  } catch (err) {
    el("audit-running").textContent = String(err);
  }
});
document.addEventListener("change", (e) => {
  if (e.target.dataset.filter) { state.filters[e.target.dataset.filter] = e.target.value; show(); }
});
el("login").addEventListener("submit", async (e) => {
  e.preventDefault();
  state.token = el("token").value;
  try {
    const who = await api("/api/whoami");
    sessionStorage.setItem("admission-token", state.token);
    start(who);
  } catch (err) {
    if (err.message === "unauthorized") el("login-error").textContent = "that token is not in the daemon's policy";
  }
});
window.addEventListener("hashchange", show);

let following = false;
function start(who) {
  el("who").textContent = who.principal + (who.namespaces.length ? " (" + who.namespaces.join(", ") + ")" : "");
  show();
  if (!following) { following = true; follow(); }
}
if (state.token) api("/api/whoami").then(start).catch(() => {}); else showLogin("sign in");
