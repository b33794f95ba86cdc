// kuota dashboard: renders the server's state (GET /api/state, then the
// server-sent events of /api/events). Read-only: it never sends anything but
// GETs. Text from the cluster is set with textContent, never as HTML.
"use strict";

const COLORS = { usage: "#1d3557", nominal: "#a8c5e6", limit: "#e3e6ea" };
let decisions = [];
let lastState = null;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "dataset") Object.assign(e.dataset, v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function workloadLink(key) {
  // ns/name for a Job, ns/<kind>/name for another kind (docs/design/workload-identity.md)
  const path = key.split("/").map(encodeURIComponent).join("/");
  return el("a", { href: `/workload/${path}` }, key);
}

function fmt(v) {
  if (v === null || v === undefined) return "∞";
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

function barText(b) {
  const unit = b.unit === "GiB" ? " GiB" : "";
  let t = `${b.flavor} / ${b.resource}: ${fmt(b.usage)}${unit} of ${b.nominal === null ? "?" : fmt(b.nominal)}${unit} nominal`;
  if (b.limit !== null) t += `, ${fmt(b.limit)}${unit} with borrowing`;
  if (b.borrowed) t += ` (borrowing ${fmt(b.borrowed)})`;
  return t;
}

// One small chart per flavor and resource, each on its own scale: GiB and
// device counts never share an axis.
function chart(div, b) {
  const label = `${b.resource} (${b.unit})<br>${b.flavor}`;
  const limit = b.limit !== null ? b.limit : b.nominal;
  const traces = [
    { name: "nominal + borrowing limit", x: [limit], marker: { color: COLORS.limit } },
    { name: "nominal quota", x: [b.nominal], marker: { color: COLORS.nominal }, width: 0.6 },
    { name: "usage", x: [b.usage], marker: { color: COLORS.usage }, width: 0.35 },
  ].map((t) => ({ type: "bar", orientation: "h", y: [label], hoverinfo: "x+name", ...t }));
  const top = Math.max(b.usage || 0, b.nominal || 0, limit || 0, 1);
  const layout = {
    barmode: "overlay", showlegend: false, height: 62,
    margin: { l: 190, r: 12, t: 4, b: 22 },
    xaxis: { range: [0, top * 1.05], fixedrange: true }, yaxis: { fixedrange: true },
    paper_bgcolor: "#fff", plot_bgcolor: "#fff", font: { size: 11 },
  };
  Plotly.react(div, traces, layout, { displayModeBar: false, responsive: true });
}

function charts(holder, bars) {
  while (holder.children.length > bars.length) holder.lastChild.remove();
  while (holder.children.length < bars.length) holder.append(el("div", { class: "chart" }));
  bars.forEach((b, i) => chart(holder.children[i], b));
}

function card(container, id, title, meta, bars, problem) {
  let c = container.querySelector(`[data-name="${CSS.escape(id)}"]`);
  if (!c) {
    c = el("div", { class: "card", dataset: { name: id } },
      el("h3", {}), el("div", { class: "meta" }), el("div", { class: "charts" }), el("ul", { class: "rows" }));
    container.append(c);
  }
  c.querySelector("h3").textContent = title;
  c.querySelector(".meta").textContent = meta;
  const rows = c.querySelector(".rows");
  rows.replaceChildren(...bars.map((b) => el("li", {}, barText(b))));
  if (problem) rows.append(el("li", { class: "problem" }, `unreadable: ${problem}`));
  charts(c.querySelector(".charts"), bars);
  return c;
}

function prune(container, names) {
  for (const c of [...container.children]) if (!names.has(c.dataset.name)) c.remove();
}

function renderQueues(state) {
  const queues = document.getElementById("queues");
  for (const q of state.cluster_queues) {
    const meta = `${q.cohort ? "cohort " + q.cohort + " · " : ""}admitted ${q.admitted} · pending ${q.pending}`;
    const c = card(queues, q.name, q.name, meta, q.bars, q.problem);
    c.dataset.admitted = q.admitted;
    c.dataset.pending = q.pending;
  }
  prune(queues, new Set(state.cluster_queues.map((q) => q.name)));
  const cohorts = document.getElementById("cohorts");
  for (const k of state.cohorts) {
    card(cohorts, k.name, `cohort ${k.name}`, `members: ${k.members.join(", ")} (nominal: their sum)`, k.bars, null);
  }
  prune(cohorts, new Set(state.cohorts.map((k) => k.name)));
}

function options(select, values) {
  const keep = select.value;
  select.replaceChildren(el("option", { value: "" }, "all"), ...values.map((v) => el("option", { value: v }, v)));
  select.value = values.includes(keep) ? keep : "";
}

function renderPending() {
  if (!lastState) return;
  const rows = lastState.pending;
  const fq = document.getElementById("filter-queue");
  const fn = document.getElementById("filter-namespace");
  options(fq, [...new Set(lastState.cluster_queues.map((q) => q.name).concat(rows.map((r) => r.cluster_queue)))].sort());
  options(fn, [...new Set(rows.map((r) => r.namespace))].sort());
  const body = document.querySelector("#pending tbody");
  const shown = rows.filter((r) => (!fq.value || r.cluster_queue === fq.value) && (!fn.value || r.namespace === fn.value));
  body.replaceChildren(...shown.map((r) => el("tr", { dataset: { workload: r.workload } },
    el("td", {}, workloadLink(r.workload)),
    el("td", {}, r.cluster_queue),
    el("td", {}, r.local_queue),
    el("td", {}, `${r.position} of ${r.queued}`),
    el("td", { class: "reason" }, r.reason || "queued (no Inadmissible decision yet)",
      el("small", {}, r.message || "")))));
  if (!shown.length) body.append(el("tr", {}, el("td", { colspan: "5" }, "none")));
}

function renderDecisions() {
  const ol = document.getElementById("decisions");
  const lines = decisions.slice().reverse().map((d) => {
    const when = new Date(d.at * 1000).toISOString().slice(11, 23);
    const li = el("li", { class: `t-${d.type}`, dataset: { type: d.type, workload: d.workload || "" } },
      `${when} ${d.type.padEnd(13)} `);
    if (d.workload) li.append(workloadLink(d.workload));
    else if (d.object) li.append(d.object);
    if (d.cluster_queue) li.append(` in ${d.cluster_queue}`);
    if (d.reason) li.append(` — ${d.reason}`);
    if (d.message) li.append(`: ${d.message}`);
    return li;
  });
  ol.replaceChildren(...lines);
}

function setStatus(state, text) {
  const s = document.getElementById("status");
  s.dataset.state = state;
  s.textContent = text;
}

function onState(state) {
  lastState = state;
  decisions = state.decisions;
  renderQueues(state);
  renderPending();
  renderDecisions();
  const errs = Object.entries(state.errors);
  document.body.dataset.version = state.version;
  if (errs.length) setStatus("error", errs.map(([k, v]) => `${k}: ${v}`).join("; "));
  else setStatus("live", `live · journal @${state.journal_offset ?? "-"} · decisions @${state.decision_offset ?? "-"} · ${state.read_model}`);
}

function onDecision(d) {
  const last = decisions.length ? decisions[decisions.length - 1].offset : -1;
  if (d.offset !== null && d.offset <= last) return;
  decisions.push(d);
  if (decisions.length > 200) decisions.shift();
  renderDecisions();
}

function connect() {
  const es = new EventSource("/api/events");
  es.addEventListener("state", (e) => onState(JSON.parse(e.data)));
  es.addEventListener("decision", (e) => onDecision(JSON.parse(e.data)));
  es.onerror = () => setStatus("error", "disconnected; reconnecting…");
}

document.getElementById("filter-queue").addEventListener("change", renderPending);
document.getElementById("filter-namespace").addEventListener("change", renderPending);
connect();
