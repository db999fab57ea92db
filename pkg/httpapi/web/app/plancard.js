// A plan card: the plan drawn as a dependency graph (SVG) with a step list
// beside it, updated live from the plan's events — each step pending,
// running (with its elapsed time), completed, failed, skipped or cancelled.
// Under it, what the plan used and cost and a bar per budget limit, read
// again from the plan when a step ends or the budget runs out. Chat turns,
// the review page and the operations page all use it.
import { api } from "./api.js";
import { h, s, clear, duration, statusBadge, announce, count } from "./dom.js";
import { budgetBlock } from "./shared.js";

const GLYPH = { pending: "○", running: "◔", completed: "✓", failed: "✗", skipped: "↷", cancelled: "■" };

// layers gives each step its depth: 0 without dependencies, else one more
// than its deepest dependency (a dependency on a missing step, or a cycle,
// does not break the drawing).
export function layers(steps) {
  const byNum = new Map(steps.map((st) => [st.number, st]));
  const depth = new Map();
  const visit = (n, seen) => {
    if (depth.has(n)) return depth.get(n);
    if (seen.has(n)) return 0;
    seen.add(n);
    const st = byNum.get(n);
    let d = 0;
    for (const dep of (st && st.depends_on) || []) {
      if (byNum.has(dep)) d = Math.max(d, visit(dep, seen) + 1);
    }
    depth.set(n, d);
    return d;
  };
  for (const st of steps) visit(st.number, new Set());
  return depth;
}

// Cards with running steps tick together, twice a second.
const ticking = new Set();
let timer = null;
function tick() {
  for (const card of ticking) {
    if (!card.tickOnce()) ticking.delete(card);
  }
  if (ticking.size === 0) {
    clearInterval(timer);
    timer = null;
  }
}
function startTicking(card) {
  ticking.add(card);
  if (!timer) timer = setInterval(tick, 500);
}

export class PlanCard {
  // opts: {actions: (card) => [elements], title, onOpenExecution}
  constructor(plan, opts = {}) {
    this.opts = opts;
    this.skew = 0; // browser clock minus server clock, from event times
    this.steps = new Map();
    this.reviews = [];
    this.el = h("section", { class: "plan-card", "aria-label": "plan" });
    this.el.card = this;
    this.setPlan(plan);
  }

  get id() { return this.plan.id; }

  // setPlan replaces the plan (a new version, or the stored plan): step
  // times and states known so far are kept when the plan does not say.
  setPlan(plan) {
    const old = this.steps;
    this.plan = plan;
    this.steps = new Map();
    for (const st of plan.steps || []) {
      // A step a replan put in place of one that ran starts afresh.
      const prev = st.status === "pending" ? {} : old.get(st.number) || {};
      this.steps.set(st.number, {
        ...st,
        status: st.status || prev.status || "pending",
        startedAt: st.started_at ? Date.parse(st.started_at) : prev.startedAt,
        endedAt: st.completed_at ? Date.parse(st.completed_at) : prev.endedAt,
        executionId: prev.executionId,
      });
    }
    if (plan.executions) {
      for (const ex of plan.executions) {
        const st = this.steps.get(ex.step_number);
        if (st) st.executionId = ex.id;
      }
    }
    this.render();
  }

  serverNow() { return Date.now() - this.skew; }

  // apply takes one event of the plan's stream.
  apply(ev) {
    if (ev.ts) this.skew = Date.now() - Date.parse(ev.ts);
    const at = ev.ts ? Date.parse(ev.ts) : this.serverNow();
    switch (ev.type) {
      case "plan_created":
      case "plan_revised":
        this.setPlan({ ...this.plan, ...ev.plan });
        break;
      case "plan_ready_for_review":
        this.plan = { ...this.plan, ...ev.plan, status: "pending_review" };
        this.summary = ev.summary;
        this.setPlan(this.plan);
        break;
      case "plan_review":
        this.reviews.push(ev);
        this.render();
        break;
      case "step_start": {
        const st = this.step(ev.step);
        st.status = "running";
        st.startedAt = at;
        st.endedAt = undefined;
        if (this.plan.status !== "executing") this.plan.status = "executing";
        this.render();
        break;
      }
      case "step_complete": {
        const st = this.step(ev.step);
        Object.assign(st, { status: ev.step.status, result: ev.step.result, error: ev.step.error, endedAt: at });
        if (st.startedAt === undefined) st.startedAt = at;
        this.render();
        this.reloadSpend();
        announce(`step ${st.number} ${st.status}`);
        break;
      }
      case "executor_spawned":
      case "executor_result": {
        const st = this.steps.get(ev.step_number);
        if (st) {
          st.executionId = ev.execution_id;
          this.render();
        }
        break;
      }
      case "plan_complete":
        this.plan.status = ev.status;
        this.plan.duration_ms = ev.duration_ms;
        for (const st of this.steps.values()) {
          if (st.status === "running") st.status = ev.status === "cancelled" ? "cancelled" : st.status;
        }
        this.render();
        this.reloadSpend();
        announce(`plan ${ev.status}`);
        break;
      case "budget_exhausted":
        this.exhausted = ev;
        this.render();
        this.reloadSpend();
        announce(`the ${ev.scope} budget's ${ev.limit.replaceAll("_", " ")} limit ran out`);
        break;
      default:
        break;
    }
  }

  // reloadSpend reads the plan's usage, budget and reason again (events do
  // not carry what it spent), once for a burst of events.
  reloadSpend() {
    if (!this.plan.id || this.reloading) return;
    this.reloading = setTimeout(async () => {
      let d = null;
      try {
        d = await api(`/api/plans/${this.plan.id}`);
      } catch {
        // the figures stay as they were
      }
      this.reloading = null;
      if (!d) return;
      const { usage, budget, reason } = d.plan;
      this.plan = { ...this.plan, usage, budget, reason };
      // The stored status is newer than a step's event, not than the end's.
      if (["waiting_budget", "stopped_budget", "completed", "failed", "cancelled"].includes(d.plan.status)) this.plan.status = d.plan.status;
      this.render();
    }, 200);
  }

  step(state) {
    let st = this.steps.get(state.number);
    if (!st) {
      st = { number: state.number, title: state.title, depends_on: [], status: "pending" };
      this.steps.set(state.number, st);
    }
    if (state.title) st.title = state.title;
    return st;
  }

  elapsed(st) {
    if (st.startedAt === undefined) return "";
    const end = st.status === "running" ? this.serverNow() : st.endedAt;
    return end === undefined ? "" : duration(end - st.startedAt);
  }

  // tickOnce refreshes the running steps' times; false when none runs.
  tickOnce() {
    if (!this.el.isConnected) return false;
    let running = false;
    for (const st of this.steps.values()) {
      if (st.status !== "running") continue;
      running = true;
      for (const node of this.el.querySelectorAll(`[data-elapsed="${st.number}"]`)) node.textContent = this.elapsed(st);
    }
    return running;
  }

  render() {
    const p = this.plan;
    const steps = [...this.steps.values()].sort((a, b) => a.number - b.number);
    clear(this.el);
    this.el.dataset.planId = p.id || "";
    this.el.dataset.status = p.status || "";
    const head = h("header", { class: "plan-head" },
      h("h3", {}, this.opts.title || "Plan", " ", h("span", { class: "goal", text: p.goal || "" })),
      h("div", { class: "plan-meta" },
        statusBadge(p.status || "pending"),
        p.mode ? h("span", { class: "muted", text: p.mode.replaceAll("_", " ") }) : null,
        p.version > 1 ? h("span", { class: "muted", text: `version ${p.version}` }) : null,
        p.duration_ms ? h("span", { class: "muted", text: duration(p.duration_ms) }) : null,
        p.id ? h("a", { href: `#/ops/plan/${p.id}`, class: "muted" }, "details") : null));
    const body = h("div", { class: "plan-body" }, this.graph(steps), this.list(steps));
    const extra = [];
    if (this.summary && p.status === "pending_review") extra.push(h("p", { class: "summary", text: this.summary }));
    for (const r of this.reviews) {
      extra.push(h("p", { class: "review-note" }, h("strong", {}, `Reviewer, round ${r.round}: `), statusBadge(r.verdict), " ", r.comments || ""));
    }
    const spend = budgetBlock(p, this.exhausted);
    if (spend) extra.unshift(spend);
    const actions = this.opts.actions ? this.opts.actions(this) : [];
    this.el.append(head, body, ...extra, actions.length ? h("div", { class: "actions" }, actions) : "");
    if (steps.some((st) => st.status === "running")) startTicking(this);
  }

  list(steps) {
    return h("ol", { class: "step-list", "aria-label": "steps" }, steps.map((st) =>
      h("li", { class: ["step", "st-" + st.status], "data-step": st.number },
        h("span", { class: "glyph", "aria-hidden": "true", text: GLYPH[st.status] || "•" }),
        h("span", { class: "step-title" }, `${st.number}. ${st.title || ""}`),
        " ", statusBadge(st.status),
        " ", h("span", { class: "elapsed", "data-elapsed": st.number, text: this.elapsed(st) }),
        st.depends_on && st.depends_on.length ? h("span", { class: "muted deps", text: ` after ${st.depends_on.join(", ")}` }) : null,
        st.executionId ? h("a", { class: "transcript-link", href: `#/ops/exec/${st.executionId}` }, "transcript") : null,
        st.error ? h("div", { class: "step-error", text: st.error }) : null)));
  }

  graph(steps) {
    if (steps.length === 0) return h("p", { class: "muted", text: "No steps." });
    const depth = layers(steps);
    const cols = [];
    for (const st of steps) {
      const d = depth.get(st.number) || 0;
      (cols[d] = cols[d] || []).push(st);
    }
    const vertical = window.innerWidth < 700;
    const W = 176, H = 50, GAP_MAIN = 44, GAP_CROSS = 14, PAD = 8;
    const pos = new Map();
    let maxCross = 0;
    cols.forEach((col, i) => {
      (col || []).forEach((st, j) => {
        const main = PAD + i * ((vertical ? H : W) + GAP_MAIN);
        const cross = PAD + j * ((vertical ? W : H) + GAP_CROSS);
        pos.set(st.number, vertical ? { x: cross, y: main } : { x: main, y: cross });
        maxCross = Math.max(maxCross, j + 1);
      });
    });
    const n = cols.length;
    const width = vertical ? PAD * 2 + maxCross * (W + GAP_CROSS) - GAP_CROSS : PAD * 2 + n * (W + GAP_MAIN) - GAP_MAIN;
    const height = vertical ? PAD * 2 + n * (H + GAP_MAIN) - GAP_MAIN : PAD * 2 + maxCross * (H + GAP_CROSS) - GAP_CROSS;
    const markerId = "arrow-" + Math.random().toString(36).slice(2);
    const edges = [];
    for (const st of steps) {
      for (const dep of st.depends_on || []) {
        const a = pos.get(dep), b = pos.get(st.number);
        if (!a || !b) continue;
        const d = vertical
          ? `M${a.x + W / 2},${a.y + H} C${a.x + W / 2},${a.y + H + GAP_MAIN / 2} ${b.x + W / 2},${b.y - GAP_MAIN / 2} ${b.x + W / 2},${b.y - 2}`
          : `M${a.x + W},${a.y + H / 2} C${a.x + W + GAP_MAIN / 2},${a.y + H / 2} ${b.x - GAP_MAIN / 2},${b.y + H / 2} ${b.x - 2},${b.y + H / 2}`;
        edges.push(s("path", { d, class: "edge", "marker-end": `url(#${markerId})` }));
      }
    }
    const nodes = steps.map((st) => {
      const { x, y } = pos.get(st.number);
      const title = `${st.number}. ${st.title || ""}`;
      const short = title.length > 21 ? title.slice(0, 20) + "…" : title;
      return s("g", { class: ["node", "st-" + st.status], "data-node": st.number, transform: `translate(${x},${y})` },
        s("title", { text: `${title} — ${st.status}` }),
        s("rect", { width: W, height: H, rx: 8 }),
        s("text", { x: 10, y: 20, class: "node-title", text: short }),
        s("text", { x: 10, y: 39, class: "node-status" },
          s("tspan", { class: "node-glyph", text: (GLYPH[st.status] || "•") + " " }),
          s("tspan", { text: st.status + " " }),
          s("tspan", { "data-elapsed": st.number, text: this.elapsed(st) })));
    });
    const label = `Dependency graph of ${count(steps.length, "step")}: ` +
      steps.map((st) => `${st.number} ${st.status}${st.depends_on && st.depends_on.length ? " after " + st.depends_on.join(" and ") : ""}`).join("; ");
    return h("div", { class: "graph-wrap" },
      s("svg", { class: "plan-graph", viewBox: `0 0 ${width} ${height}`, width, role: "img", "aria-label": label, preserveAspectRatio: "xMinYMin meet" },
        s("defs", {}, s("marker", { id: markerId, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
          s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }))),
        edges, nodes));
  }
}
