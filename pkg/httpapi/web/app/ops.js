// Operations: plans across users with filters and paging, refreshed on
// their own; a plan's timeline, steps, executions, usage, cost, budget,
// reviews and revisions, watched live while it runs or waits for its
// budget, with cancel, resume and a raise of the budget; an execution's
// transcript with its tool calls; and the usage page (tokens, calls and
// cost by day, model and user).
import { api, stream } from "./api.js";
import { h, s, append, clear, when, duration, tokens, money, statusBadge, jsonText, announce, count } from "./dom.js";
import { PlanCard } from "./plancard.js";
import { approvalLine, reviewsBlock, revisionsBlock, raiseActions } from "./shared.js";
import { usagePage } from "./usage.js";

const STATUSES = ["pending_review", "in_review", "executing", "completed", "failed", "cancelled", "rejected", "interrupted", "stopped_budget", "waiting_budget"];
const MODES = ["auto_execute", "draft_only", "agent_review"];
const REFRESH_MS = 5000;

export class OpsView {
  constructor(root, app) {
    this.root = root;
    this.app = app;
    this.filters = { status: "", mode: "", user_id: "", session_id: "", since: "", until: "", limit: "25" };
    this.cursors = [""]; // the cursor of each page seen; the last is the current page's
    this.autoRefresh = true;
    this.timer = null;
    this.watch = null; // AbortController of a live watch
  }

  show(params) {
    this.leave();
    if (params[0] === "plan" && params[1]) this.plan(params[1]);
    else if (params[0] === "exec" && params[1]) this.execution(params[1]);
    else if (params[0] === "usage") usagePage(this.root, this.app);
    else this.list();
  }

  // leave stops what the last page had running: its refresh timer and live watch.
  leave() {
    clearInterval(this.timer);
    this.timer = null;
    if (this.watch) this.watch.abort();
    this.watch = null;
  }

  list() {
    clear(this.root);
    const f = this.filters;
    const sel = (name, label, values) => h("div", { class: "field" }, h("label", { for: `f-${name}`, text: label }),
      h("select", { id: `f-${name}`, name }, h("option", { value: "", text: "any" }),
        values.map((v) => h("option", { value: v, text: v.replaceAll("_", " "), selected: f[name] === v }))));
    const input = (name, label, type, extra = {}) => h("div", { class: "field" }, h("label", { for: `f-${name}`, text: label }),
      h("input", { id: `f-${name}`, name, type, value: f[name], ...extra }));
    const form = h("form", { class: "filters", "aria-label": "Plan filters" },
      sel("status", "Status", STATUSES),
      sel("mode", "Mode", MODES),
      this.app.isOperator() ? input("user_id", "User", "text", { placeholder: "every user" }) : null,
      input("session_id", "Session", "text", { placeholder: "any session" }),
      input("since", "Created after", "datetime-local"),
      input("until", "Created before", "datetime-local"),
      h("div", { class: "field" }, h("label", { for: "f-limit", text: "Per page" }),
        h("select", { id: "f-limit", name: "limit" }, ["10", "25", "50", "100"].map((v) => h("option", { value: v, text: v, selected: f.limit === v })))),
      h("div", { class: "field buttons" }, h("button", { type: "submit", class: "primary" }, "Apply"),
        h("button", { type: "button", onclick: () => { this.filters = { status: "", mode: "", user_id: "", session_id: "", since: "", until: "", limit: "25" }; this.cursors = [""]; this.list(); } }, "Clear")));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      for (const el of form.elements) if (el.name) this.filters[el.name] = el.value;
      this.cursors = [""];
      this.load();
    });
    const auto = h("input", { type: "checkbox", id: "auto-refresh", checked: this.autoRefresh });
    auto.addEventListener("change", () => { this.autoRefresh = auto.checked; this.schedule(); });
    this.table = h("div", { class: "plans-table" });
    this.pager = h("nav", { class: "pager", "aria-label": "Pages" });
    this.root.append(
      h("div", { class: "ops-head" }, h("h1", { text: "Plans" }),
        h("span", { class: "muted whose", text: this.app.isOperator() ? "every user's plans" : "your plans" }),
        h("a", { href: "#/ops/usage" }, "Usage and cost"),
        h("span", { class: "inline-field" }, auto, h("label", { for: "auto-refresh", text: " refresh every 5 s" }))),
      form, this.table, this.pager);
    this.load();
  }

  schedule() {
    clearInterval(this.timer);
    this.timer = this.autoRefresh ? setInterval(() => { if (!this.root.hidden && this.table.isConnected) this.load(true); }, REFRESH_MS) : null;
  }

  query() {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(this.filters)) {
      if (!v) continue;
      q.set(k, k === "since" || k === "until" ? new Date(v).toISOString().replace(/\.\d{3}Z$/, "Z") : v);
    }
    const cursor = this.cursors[this.cursors.length - 1];
    if (cursor) q.set("cursor", cursor);
    return q.toString();
  }

  async load(quiet) {
    let data;
    try {
      data = await api(`/api/plans?${this.query()}`);
    } catch (err) {
      clear(this.table).append(h("p", { class: "error", role: "alert", text: err.message }));
      return;
    }
    const showOwner = this.app.isOperator();
    const rows = data.plans.map((p) => {
      const done = p.steps.filter((st) => st.status === "completed").length;
      return h("tr", { "data-plan-id": p.id },
        h("td", { "data-label": "Created", text: when(p.created_at) }),
        showOwner ? h("td", { "data-label": "User", class: "owner", text: this.app.whose(p.user_id) }) : null,
        h("td", { "data-label": "Goal", class: "goal-cell" }, h("a", { href: `#/ops/plan/${p.id}`, text: p.goal || "(no goal)" })),
        h("td", { "data-label": "Mode", text: p.mode.replaceAll("_", " ") }),
        h("td", { "data-label": "Status" }, statusBadge(p.status)),
        h("td", { "data-label": "Steps", text: `${done}/${p.steps.length}` }),
        h("td", { "data-label": "Duration", text: duration(p.duration_ms) }),
        h("td", { "data-label": "Tokens", text: String((p.usage.input_tokens || 0) + (p.usage.output_tokens || 0)) }));
    });
    clear(this.table).append(data.plans.length === 0 ? h("p", { class: "empty", text: "No plan matches." }) :
      h("table", { class: "plans" },
        h("caption", { class: "sr-only", text: "Plans, newest first" }),
        h("thead", {}, h("tr", {}, ["Created", showOwner ? "User" : null, "Goal", "Mode", "Status", "Steps", "Duration", "Tokens"]
          .filter(Boolean).map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", {}, rows)));
    clear(this.pager);
    const page = this.cursors.length;
    this.pager.append(
      h("button", { type: "button", disabled: page === 1, onclick: () => { this.cursors.pop(); this.load(); } }, "← Newer"),
      h("span", { class: "muted", text: ` page ${page} ` }),
      h("button", { type: "button", disabled: !data.next_cursor, onclick: () => { this.cursors.push(data.next_cursor); this.load(); } }, "Older →"));
    if (!quiet) announce(count(data.plans.length, "plan"));
    if (!this.timer) this.schedule();
  }

  async plan(id) {
    clear(this.root);
    let d;
    try {
      d = await api(`/api/plans/${id}`);
    } catch (err) {
      this.root.append(h("p", {}, h("a", { href: "#/ops" }, "← Plans")), h("p", { class: "error", role: "alert", text: err.message }));
      return;
    }
    const p = d.plan;
    const mine = p.user_id === this.app.me.user_id;
    const canCancel = ["executing", "pending_review", "in_review", "waiting_budget"].includes(p.status) && (mine || this.app.isOperator());
    const canResume = ["failed", "cancelled", "interrupted", "stopped_budget"].includes(p.status) && mine;
    const status = h("p", { class: "action-status", role: "status" });
    // A plan waiting for its budget offers the raise on its card; one form
    // while it waits, kept as the card redraws.
    const card = new PlanCard({ ...p, executions: d.executions }, { title: "Graph",
      actions: (c) => (mine ? raiseActions(c, (limits) => this.raise(p, limits)) : []) });
    const actions = h("div", { class: "actions" },
      canCancel ? h("button", { type: "button", class: "danger", "data-action": "cancel", onclick: () => this.cancel(p.id, status) }, "Cancel plan") : null,
      canResume ? h("button", { type: "button", class: "primary", "data-action": "resume", onclick: () => this.resume(p, card, status) }, "Resume") : null,
      p.status === "pending_review" ? h("a", { class: "button", href: `#/review/${p.id}` }, "Review") : null,
      h("button", { type: "button", onclick: () => this.plan(p.id) }, "Reload"));
    this.root.append(
      h("p", {}, h("a", { href: "#/ops" }, "← Plans")),
      h("h1", { text: p.goal }),
      h("dl", { class: "facts" },
        fact("Status", statusBadge(p.status)), fact("Owner", this.app.whose(p.user_id)), fact("Mode", p.mode.replaceAll("_", " ")),
        fact("Version", String(p.version)), fact("Created", when(p.created_at)),
        p.started_at ? fact("Started", when(p.started_at)) : null,
        p.duration_ms ? fact("Duration", duration(p.duration_ms)) : null,
        fact("Usage", tokens(p.usage)),
        p.usage.cost_usd || p.usage.cost_unknown ? fact("Cost", p.usage.cost_unknown ? `${money(p.usage.cost_usd)} and some unpriced` : money(p.usage.cost_usd)) : null,
        p.session_id ? fact("Session", h("a", { href: `#/chat/${p.session_id}`, text: p.session_id })) : null,
        traceFact(d.runs, this.app.me)),
      ...approvalLine(p, this.app),
      actions, status,
      card.el,
      h("section", { class: "block", "aria-label": "Timeline" }, h("h2", { text: "Timeline" }), timeline(p)),
      stepsTable(p),
      executionsTable(d.executions),
      reviewsBlock(d.reviews) || "",
      revisionsBlock(d.revisions) || "");
    if (p.status === "executing" || p.status === "waiting_budget") this.follow(p.id, card, status);
  }

  // follow watches a running plan live (GET /api/plans/{id}/events).
  async follow(id, card, status) {
    if (this.watch) this.watch.abort();
    const controller = new AbortController();
    this.watch = controller;
    status.textContent = card.plan.status === "waiting_budget" ? "Waiting for its budget to be raised; watching live…" : "Watching live…";
    try {
      await stream(`/api/plans/${id}/events`, { method: "GET", signal: controller.signal, onEvent: (ev) => card.apply(ev) });
    } catch (err) {
      if (err.name === "AbortError") return;
      status.textContent = err.message;
      return;
    }
    if (this.watch === controller && !this.root.hidden) this.plan(id); // it ended: show the record
  }

  async cancel(id, status) {
    try {
      await api(`/api/plans/${id}/cancel`, { method: "POST" });
      announce("plan cancelled");
    } catch (err) {
      status.textContent = err.message;
      return;
    }
    if (!this.watch) this.plan(id);
  }

  async resume(p, card, status) {
    if (this.watch) this.watch.abort();
    const controller = new AbortController();
    this.watch = controller;
    status.textContent = "Resuming…";
    for (const b of this.root.querySelectorAll(".actions button")) b.disabled = b.dataset.action !== "cancel";
    const cancel = h("button", { type: "button", class: "danger", "data-action": "cancel", onclick: () => this.cancel(p.id, status) }, "Cancel plan");
    const actions = this.root.querySelector(".actions");
    if (!actions.querySelector('[data-action="cancel"]')) actions.prepend(cancel);
    try {
      await stream(`/api/plans/${p.id}/resume`, { body: {}, signal: controller.signal, onEvent: (ev) => {
        if (ev.type === "step_start") status.textContent = "Running…";
        card.apply(ev);
      } });
    } catch (err) {
      if (err.name === "AbortError") return;
      status.textContent = err.message;
      for (const b of this.root.querySelectorAll(".actions button")) b.disabled = false;
      return;
    }
    this.watch = null;
    if (!this.root.hidden) this.plan(p.id);
  }

  // raise raises the budget of a plan that waits for it. The page already
  // watches the plan, and so shows the run it goes on in; the answer comes
  // at the run's end ("stream": false), a refusal at once (the raise form
  // shows it).
  async raise(p, limits) {
    await api(`/api/plans/${p.id}/budget`, { method: "POST", body: { ...limits, stream: false } });
    announce("budget raised");
  }

  async execution(id) {
    clear(this.root);
    let d;
    try {
      d = await api(`/api/executions/${id}`);
    } catch (err) {
      this.root.append(h("p", {}, h("a", { href: "#/ops" }, "← Plans")), h("p", { class: "error", role: "alert", text: err.message }));
      return;
    }
    const e = d.execution;
    const transcript = h("ol", { class: "transcript-list" }, d.transcript.map((m) => h("li", { class: ["tm", "tm-" + m.role] },
      h("span", { class: "tm-role", text: m.role + (m.name ? ` · ${m.name}` : "") }),
      m.content ? h("pre", { class: "tm-content", text: m.content }) : null,
      (m.tool_calls || []).map((c) => h("div", { class: "tm-call" }, "calls ", h("code", { text: c.name }), h("span", { class: "args", text: ` ${jsonText(c.arguments, 400)}` }))))));
    const calls = d.tool_calls.length === 0 ? h("p", { class: "muted", text: "No tool calls." }) :
      h("table", { class: "tool-calls" },
        h("thead", {}, h("tr", {}, ["Tool", "Arguments", "Result", "Duration"].map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", {}, d.tool_calls.map((c) => h("tr", { class: c.success ? "" : "failed" },
          h("td", { "data-label": "Tool" }, h("code", { text: c.tool })),
          h("td", { "data-label": "Arguments", class: "wrap", text: jsonText(c.arguments, 300) }),
          h("td", { "data-label": "Result", class: "wrap" }, c.success ? "✓ " : "✗ ", c.success ? jsonText(c.result, 300) : c.error),
          h("td", { "data-label": "Duration", text: `${c.duration_ms} ms` })))));
    // dom's append, not the element's: that one writes null as "null".
    append(this.root, [
      h("p", {}, h("a", { href: `#/ops/plan/${e.plan_id}` }, "← Plan")),
      h("h1", { text: `Step ${e.step_number}: executor run` }),
      h("dl", { class: "facts" }, fact("Status", statusBadge(e.status)), fact("Started", when(e.started_at)),
        fact("Duration", duration(e.duration_ms)), fact("Usage", tokens(e.usage)), fact("Tool calls", String(e.tool_calls))),
      h("section", { class: "block" }, h("h2", { text: "Task" }), h("pre", { class: "wrap", text: e.task })),
      e.result ? h("section", { class: "block" }, h("h2", { text: "Result" }), h("pre", { class: "wrap", text: e.result })) : null,
      e.error ? h("section", { class: "block" }, h("h2", { text: "Error" }), h("pre", { class: "wrap error", text: e.error })) : null,
      h("section", { class: "block", "aria-label": "Transcript" }, h("h2", { text: "Transcript" }), transcript),
      h("section", { class: "block", "aria-label": "Tool calls" }, h("h2", { text: "Tool calls" }), calls)]);
  }
}

const fact = (k, v) => [h("dt", { text: k }), h("dd", {}, v)];

// traceFact links the plan's traced runs to their traces in the operators'
// trace viewer (telemetry.trace_url, given by /api/me), when there is one.
function traceFact(runs, me) {
  const url = me && me.trace_url;
  const traced = (runs || []).filter((r) => r.trace_id);
  if (!url || traced.length === 0) return null;
  const links = [];
  traced.forEach((r, i) => {
    if (i > 0) links.push(" · ");
    links.push(h("a", { href: url.replaceAll("{trace_id}", r.trace_id), target: "_blank", rel: "noopener", "data-trace": r.trace_id, text: r.kind }));
  });
  return fact("Traces", h("span", {}, ...links));
}

function stepsTable(p) {
  return h("section", { class: "block", "aria-label": "Steps" }, h("h2", { text: "Steps" }),
    h("table", { class: "steps" },
      h("thead", {}, h("tr", {}, ["#", "Step", "Status", "After", "Tools", "Duration"].map((c) => h("th", { scope: "col", text: c })))),
      h("tbody", {}, p.steps.map((st) => h("tr", { "data-step": st.number },
        h("td", { "data-label": "#", text: String(st.number) }),
        h("td", { "data-label": "Step", class: "wrap" }, h("strong", { text: st.title }), st.description ? h("div", { class: "muted", text: st.description }) : null,
          st.result ? h("details", {}, h("summary", {}, "result"), h("pre", { class: "wrap", text: st.result })) : null,
          st.error ? h("div", { class: "error", text: st.error }) : null),
        h("td", { "data-label": "Status" }, statusBadge(st.status)),
        h("td", { "data-label": "After", text: (st.depends_on || []).join(", ") || "—" }),
        h("td", { "data-label": "Tools", class: "wrap", text: st.tool ? `${st.tool} (direct)` : (st.tools || []).join(", ") || "—" }),
        h("td", { "data-label": "Duration", text: duration(st.duration_ms) || "—" }))))));
}

function executionsTable(execs) {
  if (!execs || execs.length === 0) return h("section", { class: "block" }, h("h2", { text: "Executions" }), h("p", { class: "muted", text: "No executor ran yet." }));
  return h("section", { class: "block", "aria-label": "Executions" }, h("h2", { text: "Executions" }),
    h("table", { class: "executions" },
      h("thead", {}, h("tr", {}, ["Step", "Status", "Duration", "Tokens", "Tool calls", ""].map((c) => h("th", { scope: "col", text: c })))),
      h("tbody", {}, execs.map((e) => h("tr", {},
        h("td", { "data-label": "Step", text: String(e.step_number) }),
        h("td", { "data-label": "Status" }, statusBadge(e.status)),
        h("td", { "data-label": "Duration", text: duration(e.duration_ms) }),
        h("td", { "data-label": "Tokens", text: String((e.usage.input_tokens || 0) + (e.usage.output_tokens || 0)) }),
        h("td", { "data-label": "Tool calls", text: String(e.tool_calls) }),
        h("td", {}, h("a", { href: `#/ops/exec/${e.id}`, class: "transcript-link", "aria-label": `transcript of step ${e.step_number}` }, "Transcript")))))));
}

// timeline draws each step as a bar on the plan's time axis.
function timeline(p) {
  const started = p.steps.filter((st) => st.started_at);
  if (started.length === 0) return h("p", { class: "muted", text: "No step has started." });
  const t0 = Math.min(...started.map((st) => Date.parse(st.started_at)));
  const ends = p.steps.map((st) => (st.completed_at ? Date.parse(st.completed_at) : st.started_at ? Date.now() : t0));
  const t1 = Math.max(t0 + 1, ...ends);
  const span = t1 - t0;
  const W = 640, LABEL = 150, ROW = 26, PAD = 4;
  const plot = W - LABEL - 70;
  const x = (t) => LABEL + ((t - t0) / span) * plot;
  const rows = p.steps.map((st, i) => {
    const y = PAD + i * ROW;
    const label = `${st.number}. ${st.title}`;
    const parts = [s("text", { x: 0, y: y + 16, class: "tl-label", text: label.length > 22 ? label.slice(0, 21) + "…" : label }, s("title", { text: label }))];
    if (st.started_at) {
      const a = Date.parse(st.started_at);
      const b = st.completed_at ? Date.parse(st.completed_at) : Date.now();
      const bx = x(a), bw = Math.max(3, x(b) - bx);
      parts.push(s("rect", { x: bx, y: y + 4, width: bw, height: ROW - 10, rx: 3, class: "tl-bar st-" + st.status },
        s("title", { text: `step ${st.number}: ${st.status}, ${duration(b - a)}` })));
      parts.push(s("text", { x: bx + bw + 4, y: y + 16, class: "tl-dur", text: duration(b - a) }));
    } else {
      parts.push(s("text", { x: LABEL, y: y + 16, class: "tl-dur", text: st.status }));
    }
    return s("g", { "data-step": st.number }, parts);
  });
  const height = PAD * 2 + p.steps.length * ROW + 18;
  const axisY = height - 14;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => s("text", { x: LABEL + f * plot, y: axisY + 12, class: "tl-tick", "text-anchor": "middle", text: duration(f * span) }));
  const summary = p.steps.map((st) => `step ${st.number} ${st.status}${st.duration_ms ? " " + duration(st.duration_ms) : ""}`).join("; ");
  return s("svg", { class: "timeline", viewBox: `0 0 ${W} ${height}`, role: "img", "aria-label": `Timeline: ${summary}` },
    s("line", { x1: LABEL, x2: LABEL + plot, y1: axisY, y2: axisY, class: "tl-axis" }), ticks, rows);
}
