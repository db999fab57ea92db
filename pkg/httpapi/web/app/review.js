// Review: the inbox of plans and tool calls waiting for a human (a call
// that needs approval is approved or rejected there, one in doubt retried,
// marked done or failed), and one plan's review —
// its steps, tools and dependencies, the reviewer's comments, the revision
// diffs — approved as it is, approved with edits made in a step editor
// (the server validates them; its errors show at the step they name), or
// rejected with a reason.
import { api, stream, ApiError } from "./api.js";
import { h, append, clear, when, statusBadge, announce, count, sourceLabel } from "./dom.js";
import { PlanCard } from "./plancard.js";
import { approvalLine, reviewsBlock, revisionsBlock, holdForm } from "./shared.js";

const nums = (text) => text.split(/[\s,]+/).filter(Boolean).map((x) => (/^\d+$/.test(x) ? Number(x) : x));
const list = (text) => text.split(",").map((x) => x.trim()).filter(Boolean);

export class ReviewView {
  constructor(root, app) {
    this.root = root;
    this.app = app;
  }

  show(params) {
    if (this.busy) return; // an approval streams: stay on it
    if (params[0]) this.plan(params[0]);
    else this.inbox();
  }

  async inbox() {
    clear(this.root);
    const heading = h("h1", { text: "Waiting for review" });
    const note = h("p", { class: "muted", text: this.app.isOperator() ? "Every user's plans and tool calls that wait for a human." : "Your plans and tool calls that wait for your decision." });
    this.root.append(heading, note);
    let data, holds;
    try {
      [data, holds] = await Promise.all([api("/api/plans?status=pending_review&limit=100"), api("/api/tool-approvals")]);
    } catch (err) {
      this.root.append(h("p", { class: "error", role: "alert", text: err.message }));
      return;
    }
    if (data.plans.length === 0 && holds.decisions.length === 0) {
      this.root.append(h("p", { class: "empty", text: "Nothing waits for review." }));
      return;
    }
    this.root.append(h("section", { class: "inbox-plans", "aria-labelledby": "inbox-plans" }, h("h2", { id: "inbox-plans", text: "Plans" }),
      data.plans.length === 0 ? h("p", { class: "muted", text: "No plan waits for review." }) :
        h("ul", { class: "inbox" }, data.plans.map((p) => h("li", {},
          h("a", { href: `#/review/${p.id}`, class: "inbox-item" },
            h("span", { class: "goal", text: p.goal }),
            h("span", { class: "muted", text: ` · ${count(p.steps.length, "step")} · ${p.mode.replaceAll("_", " ")} · ${when(p.created_at)}` }),
            h("span", { class: "owner", text: ` · ${this.app.whose(p.user_id)}` })))))));
    if (holds.decisions.length) this.root.append(this.holds(holds.decisions));
  }

  // holds lists the tool calls that wait: each with where it comes from
  // and the buttons that decide it (shared with the chat's inline ones);
  // another user's, shown to an operator, only to read.
  holds(list) {
    const items = list.map((r) => {
      const mine = r.user_id === this.app.me.user_id;
      const where = [
        r.plan_id ? h("a", { href: `#/ops/plan/${r.plan_id}`, text: "its plan" }) : null,
        r.session_id ? h("a", { href: `#/chat/${r.session_id}`, text: "its chat" }) : null,
      ].filter(Boolean);
      const owner = this.app.whose(r.user_id);
      const form = holdForm(r, sourceLabel({ role: r.role || "planner", step_number: r.step_number }),
        { readOnly: mine ? "" : `Only ${r.user_id}, who owns this call, can decide it.`, onDecided: () => this.app.refreshInbox() });
      return h("li", { class: "inbox-hold", "data-call": r.call_id },
        form,
        h("p", { class: "muted hold-where" }, `${r.kind === "in_doubt" ? "in doubt" : "waits for approval"} since ${when(r.created_at)}`,
          ` · ${owner}`, where.length ? [" · ", where.flatMap((a, i) => (i ? [" · ", a] : [a]))] : ""));
    });
    return h("section", { class: "inbox-holds", "aria-labelledby": "inbox-holds" }, h("h2", { id: "inbox-holds", text: "Tool calls" }),
      h("ul", { class: "inbox" }, items));
  }

  // plan shows one plan's review; ran is what an approval made on this
  // page showed (its answer), kept under the plan as it is now.
  async plan(id, ran) {
    clear(this.root);
    let d;
    try {
      d = await api(`/api/plans/${id}`);
    } catch (err) {
      append(this.root, [h("p", {}, h("a", { href: "#/review" }, "← Inbox")), h("p", { class: "error", role: "alert", text: err.message }), ran]);
      return;
    }
    const p = d.plan;
    const mine = p.user_id === this.app.me.user_id;
    const waiting = p.status === "pending_review";
    this.meta = h("p", { class: "plan-meta" });
    this.showMeta(p);
    this.root.append(
      h("p", {}, h("a", { href: "#/review" }, "← Inbox")),
      h("h1", {}, "Review: ", h("span", { text: p.goal })),
      this.meta,
      ...approvalLine(p, this.app));
    if (!waiting) {
      this.root.append(h("p", { class: "notice", text: `This plan is ${p.status.replaceAll("_", " ")}; it no longer waits for review.` }));
    } else if (!mine) {
      this.root.append(h("p", { class: "notice", text: `Only ${p.user_id}, who owns this plan, can approve or reject it.` }));
    }
    const sideParts = [reviewsBlock(d.reviews), revisionsBlock(d.revisions)].filter(Boolean);
    const graph = new PlanCard({ ...p, executions: d.executions }, { title: "Steps" });
    const editor = waiting && mine ? this.editor(p, graph) : h("div", {});
    this.root.append(h("div", { class: ["review-grid", sideParts.length ? "with-side" : ""] }, h("div", {}, graph.el, editor, ran),
      sideParts.length ? h("div", { class: "review-side" }, sideParts) : null));
  }

  // showMeta writes the plan's status, mode, version and owner line.
  showMeta(p) {
    clear(this.meta).append(statusBadge(p.status), ` ${p.mode.replaceAll("_", " ")} · version ${p.version} · owner ${this.app.whose(p.user_id)} · ${when(p.created_at)}`,
      " · ", h("a", { href: `#/ops/plan/${p.id}` }, "operations view"));
  }

  // editor is the step editor with the approve and reject controls; graph
  // is the plan's card above it, which an approval's run updates live.
  editor(p, graph) {
    const form = h("form", { class: "editor", "aria-label": "Step editor", novalidate: true });
    const stepsEl = h("div", { class: "step-edits" });
    const planErrors = h("div", { class: "plan-errors", role: "alert" });
    let next = Math.max(0, ...p.steps.map((s) => s.number)) + 1;
    const addStep = (st) => {
      const n = st.number;
      const id = (f) => `edit-${n}-${f}`;
      const field = (f, label, el, hint) => h("div", { class: ["field", f === "title" || f === "description" ? "wide" : ""] }, h("label", { for: id(f), text: label }), el,
        hint ? h("span", { class: "hint muted", id: id(f) + "-hint", text: hint }) : null);
      const direct = Boolean(st.tool);
      const fs = h("fieldset", { class: "step-edit", "data-step": n },
        h("legend", {}, `Step ${n}`, st.status && st.status !== "pending" ? [" ", statusBadge(st.status)] : ""),
        field("title", "Title", h("input", { id: id("title"), name: "title", type: "text", value: st.title || "" })),
        field("description", "Description", h("textarea", { id: id("description"), name: "description", rows: 2, text: st.description || "" })),
        direct
          ? h("p", { class: "muted", text: `Calls ${st.tool} directly with ${JSON.stringify(st.args || {})}` })
          : field("tools", "Tools", h("input", { id: id("tools"), name: "tools", type: "text", value: (st.tools || []).join(", "), "aria-describedby": id("tools") + "-hint" }), "comma-separated tool or tool set names"),
        field("depends", "Depends on", h("input", { id: id("depends"), name: "depends_on", type: "text", value: (st.depends_on || []).join(", "), "aria-describedby": id("depends") + "-hint" }), "step numbers, comma-separated"),
        h("div", { class: "step-errors", role: "alert", id: id("errors") }),
        h("button", { type: "button", class: "link danger", onclick: () => { fs.remove(); announce(`step ${n} removed`); } }, `Remove step ${n}`));
      fs.original = st;
      stepsEl.append(fs);
      return fs;
    };
    p.steps.forEach(addStep);
    const noteId = "approve-note", reasonId = "reject-reason";
    const note = h("input", { id: noteId, type: "text", name: "note", placeholder: "optional" });
    const reason = h("input", { id: reasonId, type: "text", name: "reason", placeholder: "why it should not run" });
    const result = h("div", { class: "run-result" });
    const collect = () => [...stepsEl.querySelectorAll("fieldset.step-edit")].map((fs) => {
      const o = fs.original;
      const get = (name) => fs.querySelector(`[name="${name}"]`);
      const step = { number: Number(fs.dataset.step), title: get("title").value.trim(), description: get("description").value.trim() };
      if (o.tool) {
        step.tool = o.tool;
        if (o.args !== undefined) step.args = o.args;
      } else {
        step.executor_required = true;
        const tools = list(get("tools").value);
        if (tools.length) step.tools = tools;
      }
      const deps = nums(get("depends_on").value);
      if (deps.length) step.depends_on = deps;
      return step;
    });
    const approve = async (withEdits) => {
      this.clearErrors(form, planErrors);
      const body = { version: p.version }; // the version shown: a plan changed since is a 409
      if (note.value.trim()) body.note = note.value.trim();
      if (withEdits) body.steps = collect();
      await this.approve(p, body, { form, planErrors, result, graph, wrap });
    };
    const reject = async () => {
      if (!reason.value.trim()) return;
      this.clearErrors(form, planErrors);
      try {
        await api(`/api/plans/${p.id}/reject`, { method: "POST", body: { reason: reason.value.trim() } });
      } catch (err) {
        planErrors.append(h("p", { class: "error", text: err.message }));
        return;
      }
      announce("plan rejected");
      this.app.refreshInbox();
      this.plan(p.id);
    };
    // A rejection is for good and says why: Reject waits for a reason.
    const rejectButton = h("button", { type: "button", class: "danger", "data-action": "reject", disabled: true, onclick: reject }, "Reject");
    reason.addEventListener("input", () => { rejectButton.disabled = !reason.value.trim(); });
    form.append(
      h("h2", { text: "Decide" }),
      stepsEl,
      h("button", { type: "button", onclick: () => addStep({ number: next++, title: "", description: "", tools: [], depends_on: [] }).querySelector("input").focus() }, "Add a step"),
      planErrors,
      h("div", { class: "field" }, h("label", { for: noteId, text: "Note for the record" }), note),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", "data-action": "approve", onclick: () => approve(false) }, "Approve as is"),
        h("button", { type: "button", "data-action": "approve-edits", onclick: () => approve(true) }, "Approve with edits")),
      h("div", { class: "reject-row" },
        h("div", { class: "field" }, h("label", { for: reasonId, text: "Reason to reject" }), reason),
        rejectButton));
    form.addEventListener("submit", (e) => e.preventDefault());
    const wrap = h("div", { class: "decide" }, form, result);
    return wrap;
  }

  clearErrors(form, planErrors) {
    clear(planErrors);
    for (const el of form.querySelectorAll(".step-errors")) clear(el);
    for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
    for (const el of form.querySelectorAll("fieldset.invalid")) el.classList.remove("invalid");
  }

  // showErrors puts each of the server's problems at the step it names
  // ("step 2 …", or every step of "the steps form a cycle: 1 → 2 → 1");
  // the others above the buttons.
  showErrors(err, form, planErrors) {
    const problems = err.fields && err.fields.length ? err.fields.map((f) => f.message) : [err.message];
    let first = null;
    for (const msg of problems) {
      let steps = [];
      const m = /^step (\d+)\b/.exec(msg);
      if (m) steps = [Number(m[1])];
      const cyc = /cycle: ([\d →\s]+)$/.exec(msg);
      if (cyc) steps = [...new Set(cyc[1].split("→").map((x) => Number(x.trim())))];
      let placed = false;
      for (const n of steps) {
        const fs = form.querySelector(`fieldset.step-edit[data-step="${n}"]`);
        if (!fs) continue;
        fs.classList.add("invalid");
        fs.querySelector(".step-errors").append(h("p", { class: "error", text: msg }));
        for (const input of fs.querySelectorAll("input, textarea")) input.setAttribute("aria-invalid", "true");
        first = first || fs;
        placed = true;
      }
      if (!placed) planErrors.append(h("p", { class: "error", text: msg }));
    }
    if (first) {
      first.scrollIntoView({ block: "center" });
      first.querySelector("input")?.focus();
    }
    announce("The server did not accept the plan: " + problems.join("; "));
  }

  // approve runs the plan from the review page. Once the run started, the
  // step editor goes and the plan's card above shows the run live; when it
  // ends the page shows the plan as it is now (status, version, steps) with
  // the answer under it.
  async approve(p, body, { form, planErrors, result, graph, wrap }) {
    this.busy = true;
    for (const b of form.querySelectorAll("button")) b.disabled = true;
    const answer = h("div", { class: "msg assistant", hidden: true });
    let started = false;
    try {
      await stream(`/api/plans/${p.id}/approve`, {
        body, onEvent: (ev) => {
          if (!started) {
            started = true;
            form.hidden = true;
            clear(result).append(h("h2", { text: "Approved: running" }), answer);
            announce("plan approved; it runs now");
          }
          if (ev.type === "text" && ev.source && ev.source.role !== "executor") {
            answer.hidden = false;
            answer.append(ev.content);
          } else if (ev.type === "error") {
            result.append(h("p", { class: "error", role: "alert", text: `${ev.error.code}: ${ev.error.message}` }));
          } else {
            graph.apply(ev);
            this.showMeta({ ...p, ...graph.plan });
          }
        },
      });
    } catch (err) {
      if (started) {
        result.append(h("p", { class: "error", role: "alert", text: err.message }));
      } else {
        if (err instanceof ApiError) this.showErrors(err, form, planErrors);
        else planErrors.append(h("p", { class: "error", text: err.message }));
        for (const b of form.querySelectorAll("button")) b.disabled = false;
        this.busy = false;
        return;
      }
    }
    this.busy = false;
    this.app.refreshInbox();
    const errors = [...result.querySelectorAll(".error")];
    clear(result).append(h("h2", { text: "Answer from the approved plan" }), answer, ...errors);
    result.append(h("p", {}, "See it in ", h("a", { href: `#/ops/plan/${p.id}` }, "operations"), " or ",
      h("a", { href: `#/chat/${p.session_id}` }, "go to its chat"), "."));
    wrap.remove(); // the editor and the run's answer: the page is redrawn with the answer
    if (!this.root.hidden && this.root.isConnected) await this.plan(p.id, result);
  }
}
