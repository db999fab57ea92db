// Pieces the review and operations pages share: who let a plan run, the
// reviewer's rounds, and the revisions with what each changed.
import { h, when, statusBadge } from "./dom.js";

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
