// Pieces the pages share: who let a plan run, the reviewer's rounds, the
// revisions with what each changed; a plan's cost and budget bars and the
// form that raises a paused plan's budget; a tool call that waits on its
// owner, with the buttons that decide it.
import { api, newId } from "./api.js";
import { h, when, statusBadge, money, duration, goDuration, tokens, jsonText } from "./dom.js";

// approvalLine says who let a plan run (plan.approval) and who cancelled it.
export function approvalLine(plan, app) {
  const out = [];
  const a = plan.approval;
  if (a) {
    const who = a.user_id ? app.whose(a.user_id) : "";
    const by = { user: "its owner", operator: "an operator", auto: "automatically (run at once)", reviewer: "the reviewer agent" }[a.by] || a.by;
    out.push(h("p", { class: "approval" }, h("strong", { text: "Approved " }), `by ${by}${who ? ` (${who})` : ""}`,
      a.at ? ` at ${when(a.at)}` : "", a.note ? h("span", {}, " — ", h("q", { text: a.note })) : ""));
  }
  if (plan.cancelled_by) {
    const c = plan.cancelled_by;
    const by = { user: "its owner", operator: "an operator" }[c.by] || c.by;
    out.push(h("p", { class: "cancelled-by" }, h("strong", { text: "Cancelled " }), `by ${by} (${app.whose(c.user_id)})`,
      c.at ? ` at ${when(c.at)}` : ""));
  }
  if (plan.reason) out.push(h("p", { class: "reason" }, h("strong", { text: "Reason: " }), plan.reason));
  return out;
}

export function reviewsBlock(reviews) {
  if (!reviews || reviews.length === 0) return null;
  return h("section", { class: "block", "aria-label": "Reviewer comments" }, h("h3", { text: "Reviewer comments" }),
    h("ol", { class: "reviews" }, reviews.map((r) => h("li", {},
      h("span", { class: "muted", text: `round ${r.round}, version ${r.version} · ` }), statusBadge(r.verdict),
      h("p", { class: "comment", text: r.comments || "(no comments)" })))));
}

// revisionsBlock lists a plan's versions; each after the first says which
// steps it added, removed or changed, and shows those steps before and after.
export function revisionsBlock(revisions) {
  if (!revisions || revisions.length < 2) return null;
  const items = revisions.map((rev, i) => {
    const prev = i > 0 ? revisions[i - 1] : null;
    const d = rev.diff;
    const parts = [];
    if (d) {
      if (d.goal_changed) parts.push(h("li", { class: "diff-goal" }, "goal: ", h("del", { text: prev.goal }), " → ", h("ins", { text: rev.goal })));
      for (const n of d.added || []) parts.push(h("li", { class: "diff-added" }, h("ins", { text: `+ step ${n}: ${stepTitle(rev, n)}` })));
      for (const n of d.removed || []) parts.push(h("li", { class: "diff-removed" }, h("del", { text: `− step ${n}: ${stepTitle(prev, n)}` })));
      for (const n of d.changed || []) parts.push(h("li", { class: "diff-changed" }, `~ step ${n}: `, stepChange(prev, rev, n)));
    }
    return h("li", { class: "revision" },
      h("strong", { text: `Version ${rev.version}` }), h("span", { class: "muted", text: ` by ${rev.author} · ${when(rev.created_at)}` }),
      rev.reason ? h("p", { class: "comment", text: rev.reason }) : null,
      parts.length ? h("ul", { class: "diff" }, parts) : (i === 0 ? h("p", { class: "muted", text: "first version" }) : h("p", { class: "muted", text: "no step changed" })));
  });
  return h("section", { class: "block", "aria-label": "Revisions" }, h("h3", { text: "Revisions" }), h("ol", { class: "revisions" }, items));
}

function stepOf(rev, n) {
  return (rev && rev.steps || []).find((s) => s.number === n);
}

function stepTitle(rev, n) {
  const s = stepOf(rev, n);
  return s ? s.title : "";
}

function stepChange(prev, rev, n) {
  const a = stepOf(prev, n) || {}, b = stepOf(rev, n) || {};
  const out = [];
  const field = (name, x, y) => {
    if (x === y) return;
    out.push(h("span", { class: "diff-field" }, `${name}: `, h("del", { text: x || "—" }), " → ", h("ins", { text: y || "—" }), " "));
  };
  field("title", a.title, b.title);
  field("description", a.description, b.description);
  field("tools", (a.tools || []).join(", "), (b.tools || []).join(", "));
  field("after", (a.depends_on || []).join(", "), (b.depends_on || []).join(", "));
  field("tool", a.tool, b.tool);
  if (out.length === 0) out.push("arguments or kind changed");
  return out;
}

// LIMITS are a budget's limits as the API spells them (budget.Limits),
// with what the page calls them.
export const LIMITS = [["total_tokens", "total tokens"], ["input_tokens", "input tokens"], ["output_tokens", "output tokens"],
  ["model_calls", "model calls"], ["tool_calls", "tool calls"], ["wall_time", "wall time"], ["cost_usd", "cost"]];
const limitName = (key) => (LIMITS.find(([k]) => k === key) || [key, key.replaceAll("_", " ")])[1];

// limitMax is a limit's value (wall time in ms), 0 when it is not set.
const limitMax = (limits, key) => (key === "wall_time" ? goDuration(limits.wall_time) || 0 : Number(limits[key]) || 0);
const spentOf = (spent, key) => (key === "wall_time" ? spent.wall_time_ms : spent[key]) || 0;
const inUnit = (key, v) => (key === "cost_usd" ? money(v) : key === "wall_time" ? duration(v) : String(v));

// exhaustedLimit is the limit that stopped a plan its budget stopped: the
// budget_exhausted event's when it was seen, else the one its reason
// names ("the run budget's model_calls limit ran out …").
export function exhaustedLimit(plan, ev) {
  if (plan.status !== "waiting_budget" && plan.status !== "stopped_budget") return "";
  if (ev && ev.limit) return ev.limit;
  const m = /budget's ([a-z_]+) limit/.exec(plan.reason || "");
  return m && LIMITS.some(([k]) => k === m[1]) ? m[1] : "";
}

// budgetBlock shows what a plan used and cost and, for each limit of its
// budget, a bar of what it spent against it; the limit that ran out is
// marked in words. ev is the plan's budget_exhausted event, if seen.
export function budgetBlock(plan, ev) {
  const u = plan.usage, b = plan.budget;
  const used = u && (u.input_tokens || u.output_tokens);
  if (!used && !b) return null;
  const out = h("section", { class: "budget", "aria-label": "Cost and budget" });
  if (used) {
    const cost = u.cost_usd ? money(u.cost_usd) : u.cost_unknown ? "cost unknown" : "";
    out.append(h("p", { class: "cost-line" }, h("strong", { text: "Used: " }), tokens(u),
      cost ? [" · ", h("span", { class: "cost", text: cost })] : ""));
  }
  if (!b) return out;
  const gone = exhaustedLimit(plan, ev);
  const bars = LIMITS.filter(([k]) => limitMax(b.limits, k) > 0).map(([k, name]) => {
    const max = limitMax(b.limits, k), spent = spentOf(b.spent, k);
    const share = Math.min(1, spent / max);
    const ranOut = k === gone;
    const fill = h("span", { class: "fill" });
    fill.style.width = `${(share * 100).toFixed(1)}%`; // CSSOM: the CSP allows no style attribute
    const words = `${inUnit(k, spent)} of ${inUnit(k, max)}`;
    return h("li", { class: ["budget-limit", ranOut ? "exhausted" : "", share >= 0.8 ? "high" : ""], "data-limit": k },
      h("span", { class: "limit-name", text: name }),
      h("span", { class: "bar", role: "meter", "aria-label": name, "aria-valuemin": 0, "aria-valuemax": max, "aria-valuenow": Math.min(spent, max),
        "aria-valuetext": words }, fill),
      h("span", { class: "limit-value", text: words + (ranOut ? " · ran out" : "") }));
  });
  if (bars.length) out.append(h("ul", { class: "budget-bars", "aria-label": "Budget" }, bars));
  if (gone) {
    const scope = ev && ev.scope ? `the ${ev.scope} budget's` : "its";
    const says = ev && ev.max ? ` (${ev.used} of ${ev.max})` : "";
    out.append(h("p", { class: "budget-note", "data-exhausted": gone },
      plan.status === "waiting_budget" ? "Paused: " : "Stopped: ", `${scope} ${limitName(gone)} limit ran out${says}.`,
      plan.status === "waiting_budget" ? " Raise the budget to continue." : ""));
  }
  return out;
}

// raiseForm is the form that raises a paused plan's budget: a field for
// each limit it has (the one that ran out offered at twice its value).
// onRaise gets the raised limits (POST /api/plans/{id}/budget's body) and
// runs the plan on; what it throws shows under the form.
export function raiseForm(plan, ev, onRaise) {
  const limits = (plan.budget && plan.budget.limits) || {};
  const gone = exhaustedLimit(plan, ev);
  const keys = LIMITS.map(([k]) => k).filter((k) => limitMax(limits, k) > 0 || k === gone);
  const status = h("p", { class: "raise-status", role: "status" });
  const fields = keys.map((k) => {
    const id = `raise-${newId()}`;
    const now = limits[k];
    const wall = k === "wall_time";
    const offered = k === gone ? (wall ? `${Math.ceil((goDuration(now) || 60000) * 2 / 1000)}s` : (Number(now) || 1) * 2) : now;
    const input = h("input", { id, name: k, type: wall ? "text" : "number", min: wall ? null : 0, step: k === "cost_usd" ? "any" : 1,
      value: offered === undefined ? "" : String(offered), "data-now": now === undefined ? "" : String(now) });
    return h("div", { class: "field" }, h("label", { for: id, text: `${limitName(k)}${now ? ` (now ${wall ? now : inUnit(k, now)})` : ""}` }), input);
  });
  const button = h("button", { type: "submit", class: "primary", "data-action": "raise-budget" }, "Raise budget and continue");
  const form = h("form", { class: "raise-budget", "aria-label": "Raise the budget" }, h("div", { class: "raise-fields" }, fields), button, status);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = {};
    for (const input of form.querySelectorAll("input")) {
      const v = input.value.trim();
      if (!v || v === input.dataset.now) continue;
      body[input.name] = input.name === "wall_time" ? v : Number(v);
    }
    if (Object.keys(body).length === 0) {
      status.textContent = "Raise at least one limit.";
      return;
    }
    button.disabled = true;
    status.textContent = "Raising…";
    try {
      await onRaise(body);
      status.textContent = "";
    } catch (err) {
      status.textContent = err.fields && err.fields.length ? err.fields.map((f) => `${f.field} ${f.message}`).join("; ") : err.message;
      button.disabled = false;
    }
  });
  return form;
}

// raiseActions are a plan card's actions for a plan that waits for its
// budget: its raise form, the same one while what it offers stays the
// same, so that a redraw of the card (an event, its figures read again)
// keeps what is typed there and what the server answered.
export function raiseActions(card, onRaise) {
  const p = card.plan;
  if (p.status !== "waiting_budget") {
    card.raise = null;
    return [];
  }
  const key = JSON.stringify([p.budget && p.budget.limits, exhaustedLimit(p, card.exhausted)]);
  if (!card.raise || card.raise.key !== key) card.raise = { key, el: raiseForm(p, card.exhausted, onRaise) };
  return [card.raise.el];
}

// holdForm shows a tool call that waits on its owner (hold: a
// tool_approval_requested or tool_call_in_doubt event, or a row of
// GET /api/tool-approvals, with kind approval or in_doubt); who says whose
// call it is (the planner, step N). Approve or Reject (with a reason) a
// call that needs approval; Retry, Mark done (with the result the agent
// gets) or Fail a call in doubt. The answer goes to the run's
// tool-approvals route; the run goes on by itself. With readOnly (another
// user's call, shown to an operator) there is nothing to press.
export function holdForm(hold, who, { readOnly = "", onDecided } = {}) {
  const inDoubt = hold.kind === "in_doubt";
  const id = `hold-${newId()}`;
  const note = h("input", { id, type: "text", name: "note", placeholder: inDoubt ? "result, or why it failed" : "reason (for Reject)" });
  const status = h("p", { class: "hold-status", role: "status" });
  const form = h("form", { class: "hold", "data-call": hold.call_id, "data-run": hold.run_id, "data-kind": inDoubt ? "in_doubt" : "approval",
    "aria-label": inDoubt ? "A tool call in doubt" : "A tool call waits for approval" },
    h("p", { class: "hold-title" }, h("span", { class: "src", text: who }), " ",
      inDoubt ? "was cut off while calling " : "wants to call ", h("code", { class: "hold-tool", text: hold.tool }),
      h("span", { class: "args", text: "(" + jsonText(hold.arguments, 200) + ")" }), ` · ${String(hold.effect || "").replace("_", " ")}`),
    hold.reason ? h("p", { class: "muted", text: hold.reason }) : "");
  form.addEventListener("submit", (e) => e.preventDefault());
  if (readOnly) {
    form.append(h("p", { class: "notice", text: readOnly }));
    return form;
  }
  const decide = async (decision) => {
    const d = { call_id: hold.call_id, decision };
    const text = note.value.trim();
    if (decision === "mark_done") d.result = text;
    else if (text && decision !== "approve" && decision !== "retry") d.reason = text;
    for (const b of form.querySelectorAll("button")) b.disabled = true;
    try {
      await api(`/api/runs/${encodeURIComponent(hold.run_id)}/tool-approvals`, { method: "POST", body: { decisions: [d] } });
      form.dataset.decided = decision;
      status.textContent = { approve: "Approved.", reject: "Rejected.", retry: "Run again.", mark_done: "Marked done.", fail: "Marked failed." }[decision];
      note.disabled = true;
      if (onDecided) onDecided(decision);
    } catch (err) {
      status.textContent = err.message;
      for (const b of form.querySelectorAll("button")) b.disabled = false;
    }
  };
  const buttons = inDoubt ? [["retry", "Retry"], ["mark_done", "Mark done"], ["fail", "Fail"]] : [["approve", "Approve"], ["reject", "Reject"]];
  form.append(h("div", { class: "field" }, h("label", { for: id, text: inDoubt ? "Result or reason" : "Reason" }), note),
    h("div", { class: "hold-actions" }, buttons.map(([d, label]) => {
      const b = h("button", { type: "button", "data-decision": d }, label);
      b.addEventListener("click", () => decide(d));
      return b;
    })), status);
  return form;
}
