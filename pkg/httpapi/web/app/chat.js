// Chat: the sessions list and a session's history; context, project focus
// and plan mode pickers; the composer; each turn's answer streaming live
// with a thinking block (tool calls and results, told apart by their
// source: the planner, step N's executor, the reviewer), clarifying
// questions answered inline, a live plan card per plan, a stop button, and
// rejoining what still runs after a reload.
import { api, stream, newId, ApiError } from "./api.js";
import { h, clear, announce, tokens, jsonText, sourceLabel, when } from "./dom.js";
import { PlanCard } from "./plancard.js";
import * as runs from "./runs.js";
import { holdForm, raiseActions } from "./shared.js";

// CONTEXT_TYPES are the chat context types the server knows (a Go test
// checks this list against configs/contexts.yaml).
export const CONTEXT_TYPES = ["global", "project", "project_create", "project_audit", "project_forecast",
  "calendar", "daily_brief_update", "ontology", "brain_dump"];
const PROJECT_SCOPED = new Set(["project", "project_audit", "project_forecast"]);
const PLAN_MODES = [["", "planner decides"], ["auto_execute", "run at once"], ["draft_only", "draft, I review"],
  ["agent_review", "reviewer agent checks"]];

// Turn draws one turn: the user's message, the thinking block, plan cards,
// the answer and how it ended.
class Turn {
  constructor(view, { userText, label }) {
    this.view = view;
    this.tools = new Map(); // tool_call id -> entry
    this.texts = new Map(); // source -> text span (executors, reviewer)
    this.cards = new Map(); // plan id -> PlanCard
    this.calls = 0;
    this.el = h("article", { class: "turn" });
    if (userText !== null && userText !== undefined) {
      this.el.append(h("div", { class: "msg user" }, h("span", { class: "sr-only", text: "You: " }), userText));
    }
    if (label) this.el.append(h("p", { class: "turn-label muted", text: label }));
    this.summary = h("summary", {}, "Thinking");
    this.activity = h("ol", { class: "activity", "aria-label": "tool calls and steps" });
    this.thinking = h("details", { class: "thinking", hidden: true }, this.summary, this.activity);
    this.cardsEl = h("div", { class: "plan-cards" });
    this.answer = h("div", { class: "msg assistant", hidden: true });
    this.state = h("p", { class: "turn-state muted" });
    this.extra = h("div", { class: "turn-extra" });
    this.el.append(this.thinking, this.cardsEl, this.answer, this.extra, this.state);
  }

  setState(text) { this.state.textContent = text; }

  note(src, text, cls) {
    this.thinking.hidden = false;
    this.activity.append(h("li", { class: ["note", cls], "data-source-role": src ? src.role : "" },
      h("span", { class: "src", text: sourceLabel(src) }), " ", text));
  }

  countCalls() {
    this.summary.textContent = `Thinking · ${this.calls} tool call${this.calls === 1 ? "" : "s"}`;
  }

  toolCall(src, call) {
    this.thinking.hidden = false;
    this.calls++;
    this.countCalls();
    const result = h("span", { class: "tool-result pending", text: "running…" });
    const li = h("li", { class: "tool", "data-source-role": src ? src.role : "", "data-tool": call.name, "data-step": src && src.step_number ? src.step_number : null },
      h("span", { class: "src", text: sourceLabel(src) }), " ",
      h("code", { class: "tool-name", text: call.name }), h("span", { class: "args", text: "(" + jsonText(call.arguments, 120) + ")" }), " ",
      result);
    this.tools.set(call.id, { li, result });
    this.activity.append(li);
  }

  toolResult(src, r) {
    let entry = this.tools.get(r.tool_call_id);
    if (!entry) {
      this.toolCall(src, { id: r.tool_call_id, name: r.name, arguments: "" });
      entry = this.tools.get(r.tool_call_id);
    }
    const ok = r.success;
    entry.result.className = "tool-result " + (ok ? "ok" : "failed");
    clear(entry.result).append(h("span", { text: (ok ? "✓ " : "✗ ") + (ok ? "ok" : "failed") }),
      r.duration_ms !== undefined ? h("span", { class: "muted", text: ` ${r.duration_ms} ms` }) : "");
    const text = ok ? r.result : r.error;
    if (text) entry.li.append(h("details", { class: "tool-output" }, h("summary", {}, ok ? "result" : "error"), h("pre", { text })));
  }

  text(src, content) {
    const role = src ? src.role : "planner";
    if (role !== "executor" && role !== "reviewer" && role !== "replanner") { // the planner's, or the answer synthesized after a plan run
      this.answer.hidden = false;
      this.answer.append(content);
      return;
    }
    const key = `${role}:${src.step_number || 0}:${src.execution_id || ""}`;
    let span = this.texts.get(key);
    if (!span) {
      span = h("span", { class: "said" });
      this.thinking.hidden = false;
      this.activity.append(h("li", { class: "text", "data-source-role": role, "data-step": src.step_number || null },
        h("span", { class: "src", text: sourceLabel(src) }), " ", span));
      this.texts.set(key, span);
    }
    span.append(content);
  }

  card(plan) {
    let card = this.cards.get(plan.id);
    if (!card) {
      card = new PlanCard(plan, { actions: (c) => this.view.planActions(c, this) });
      this.cards.set(plan.id, card);
      this.cardsEl.append(card.el);
    }
    return card;
  }

  // apply takes one event of the turn's (or a plan run's) stream.
  apply(ev) {
    const src = ev.source || {};
    switch (ev.type) {
      case "agent_state":
        this.setState({ thinking: "Thinking…", executing_plan: "Running the plan…", waiting_on_user: "Waiting for you." }[ev.state] || ev.state);
        break;
      case "context_usage":
        this.note(src, `context: ${ev.estimated_tokens} of ${ev.budget} tokens${ev.compressed ? ", compressed" : ""}` +
          `${ev.trimmed && ev.trimmed.length ? ", trimmed: " + ev.trimmed.join(", ").replaceAll("_", " ") : ""}${ev.tool_gateway ? ", tools behind the gateway" : ""}`, "ctx");
        break;
      case "text":
        this.text(src, ev.content);
        break;
      case "tool_call":
        this.toolCall(src, ev.tool_call);
        break;
      case "tool_result":
        this.toolResult(src, ev);
        break;
      case "operation":
        this.note(src, `${ev.action} ${ev.entity_type} “${ev.entity_name}”: ${ev.status}`, "op");
        break;
      case "focus_active":
      case "focus_changed":
        this.note(src, `focus: ${ev.focus.project_name || ev.focus.project_id || "none"}${ev.focus.entity_name ? " / " + ev.focus.entity_name : ""}`, "ctx");
        break;
      case "context_shift":
        this.note(src, ev.message || `now in ${ev.new_context} ${ev.entity_name || ""}`, "ctx");
        break;
      case "duplicate_detected":
      case "forced_finalize":
        this.note(src, `${ev.type.replace("_", " ")}: ${ev.reason}`, "warn");
        break;
      case "plan_created":
      case "plan_revised":
      case "plan_ready_for_review":
        if (ev.reason === "replan") {
          this.note(src, `step ${ev.failed_step} failed: the plan was replanned (version ${ev.version}); completed steps are kept`, "warn");
        }
        this.card(ev.plan).apply(ev);
        break;
      case "plan_approval_requested":
        // The planner only asks: the plan runs when the user presses
        // Approve on its card, which sends the version shown.
        this.note(src, ev.summary, "review");
        api(`/api/plans/${ev.plan_id}`).then((d) => this.card(d.plan)).catch(() => {});
        break;
      case "plan_review":
      case "step_start":
      case "step_complete":
      case "executor_spawned":
      case "executor_result":
      case "plan_complete": {
        const id = ev.plan_id || src.plan_id;
        const card = this.cards.get(id);
        if (card) card.apply(ev);
        if (ev.type === "plan_review") this.note(src, `verdict ${ev.verdict}: ${ev.comments || ""}`, "review");
        break;
      }
      case "budget_exhausted": {
        const card = this.cards.get(src.plan_id);
        if (card) card.apply(ev);
        this.note(src, `the ${ev.scope} budget's ${ev.limit.replaceAll("_", " ")} limit ran out (${ev.used} of ${ev.max})`, "warn");
        break;
      }
      case "clarifying_questions":
        this.ask(ev.questions);
        break;
      case "tool_approval_requested":
      case "tool_call_in_doubt":
        this.hold(src, ev);
        break;
      case "error":
        this.extra.append(h("p", { class: "error", role: "alert", text: `${ev.error.code}: ${ev.error.message}` }));
        break;
      case "done":
        this.done(ev);
        break;
      default:
        break;
    }
  }

  done(ev) {
    const reason = ev.finished_reason;
    this.ended = true;
    const words = { completed: "", cancelled: "Stopped.", error: "Ended with an error.", limit: "Stopped at a limit." }[reason] ?? reason;
    this.setState([words, ev.usage && ev.usage.total_tokens ? tokens(ev.usage) : ""].filter(Boolean).join(" · "));
    this.el.dataset.finished = reason;
    this.thinking.open = false;
    announce(reason === "completed" ? "Answer complete." : words);
  }

  fail(err) {
    this.extra.append(h("p", { class: "error", role: "alert", text: err.message }));
    this.el.dataset.finished = "error";
    this.setState("");
  }

  // hold shows a tool call that waits on the user, inline (shared.js).
  hold(src, ev) {
    this.extra.append(holdForm({ ...ev, kind: ev.type === "tool_call_in_doubt" ? "in_doubt" : "approval" }, sourceLabel(src)));
  }

  // ask shows clarifying questions with an answer field each; the answers
  // go back as the next message.
  ask(questions) {
    if (!questions || questions.length === 0) return;
    const inputs = questions.map((q, i) => {
      const id = `clarify-${newId()}`;
      return { q, field: h("input", { id, type: "text", name: `answer-${i}`, required: true }), label: h("label", { for: id, text: q }) };
    });
    const form = h("form", { class: "clarify", "aria-label": "Clarifying questions" },
      h("p", { class: "clarify-title", text: "The assistant asks:" }),
      inputs.map((x) => h("div", { class: "field" }, x.label, x.field)),
      h("button", { type: "submit" }, "Send answers"));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const text = inputs.map((x) => `${x.q}\n${x.field.value.trim()}`).join("\n\n");
      form.remove();
      this.view.send(text);
    });
    this.extra.append(form);
    setTimeout(() => inputs[0].field.focus(), 0);
  }
}

export class ChatView {
  constructor(root, app) {
    this.root = root;
    this.app = app;
    this.sessionId = "";
    this.running = null; // {kind: "turn"|"plan", runId, planId, controller}
    this.projects = [];
    this.build();
    this.loadSessions();
    this.loadProjects();
    // A reload ends the page's streams, which must not make it forget the
    // run it was streaming: the next page rejoins it (runs.js).
    const leaving = () => {
      this.unloading = true;
      if (this.running && this.lastSeq) runs.update({ seq: this.lastSeq });
    };
    window.addEventListener("beforeunload", leaving);
    window.addEventListener("pagehide", leaving);
  }

  build() {
    const sel = (id, label, options) => h("div", { class: "field" }, h("label", { for: id, text: label }),
      h("select", { id, name: id }, options.map(([v, t]) => h("option", { value: v, text: t }))));
    this.newBtn = h("button", { type: "button", class: "primary-outline", onclick: () => { location.hash = "#/chat"; this.open(""); } }, "New chat");
    this.sessionList = h("ul", { class: "sessions", "aria-label": "Sessions" });
    this.aside = h("aside", { class: "chat-side", "aria-label": "Chat sessions" },
      h("div", { class: "side-head" }, h("h2", { text: "Sessions" }), this.newBtn), this.sessionList);
    const pickers = h("div", { class: "pickers" },
      sel("context-type", "Context", [["", "(session's)"], ...CONTEXT_TYPES.map((c) => [c, c.replaceAll("_", " ")])]),
      sel("project", "Project focus", [["", "(none)"]]),
      sel("plan-mode", "Plan mode", PLAN_MODES));
    this.transcript = h("div", { class: "transcript", role: "log", "aria-label": "Conversation" });
    // The conversation follows a running turn while the person reads its
    // end; scrolling up stops that, scrolling back to the end resumes it.
    this.following = true;
    this.autoTop = 0; // where keepUp last scrolled to
    const noteScroll = () => this.noteScroll();
    this.transcript.addEventListener("scroll", noteScroll, { passive: true });
    window.addEventListener("scroll", noteScroll, { passive: true });
    this.transcript.addEventListener("wheel", (e) => { if (e.deltaY < 0) this.following = false; }, { passive: true });
    this.input = h("textarea", { id: "message", name: "message", rows: 3, placeholder: "Ask for something with several parts…  (Enter sends, Shift+Enter for a new line)" });
    this.sendBtn = h("button", { type: "submit", class: "primary" }, "Send");
    this.stopBtn = h("button", { type: "button", class: "danger", hidden: true, onclick: () => this.stop() }, "Stop");
    this.status = h("p", { class: "composer-status muted", "aria-live": "polite" });
    this.composer = h("form", { class: "composer", "aria-label": "Message composer" },
      h("label", { for: "message", class: "sr-only", text: "Message" }), this.input,
      h("div", { class: "composer-actions" }, this.status, this.stopBtn, this.sendBtn));
    this.composer.addEventListener("submit", (e) => {
      e.preventDefault();
      const text = this.input.value.trim();
      if (!text || this.running) return;
      this.input.value = "";
      this.send(text);
    });
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.composer.requestSubmit();
      } else if (e.key === "Escape" && this.running) {
        this.stop();
      }
    });
    this.heading = h("h2", { class: "chat-title", text: "New chat" });
    const mainCol = h("div", { class: "chat-main" }, h("div", { class: "chat-head" }, this.heading, pickers), this.transcript, this.composer);
    this.root.append(h("div", { class: "chat" }, this.aside, mainCol));
    this.ctxSel = pickers.querySelector("#context-type");
    this.projSel = pickers.querySelector("#project");
    this.modeSel = pickers.querySelector("#plan-mode");
    this.ctxSel.addEventListener("change", () => this.prewarm());
    this.projSel.addEventListener("change", () => this.prewarm());
  }

  show(params) {
    const id = params[0] || "";
    if (id !== this.sessionId) {
      if (this.running) {
        this.status.textContent = "A turn is running; stop it or wait before switching sessions.";
        history.replaceState(null, "", `#/chat/${this.sessionId}`);
        return;
      }
      this.open(id);
    }
    const pending = runs.pending();
    if (pending && !this.running && !this.rejoined) {
      this.rejoined = true;
      this.rejoin(pending);
    }
  }

  // scroller is what scrolls the conversation: the transcript, or on a
  // narrow screen, where the transcript grows with what it holds, the page.
  scroller() {
    return getComputedStyle(this.transcript).maxHeight === "none" ? document.scrollingElement : this.transcript;
  }

  // noteScroll follows again at the end of the conversation, and stops
  // following when the person scrolled up from where keepUp left it (what
  // arrives meanwhile only adds below, which is no reason to stop).
  noteScroll() {
    const el = this.scroller();
    if (el.scrollHeight - el.scrollTop - el.clientHeight < 24) this.following = true;
    else if (el.scrollTop < this.autoTop - 2) this.following = false;
  }

  // keepUp scrolls to the end of the conversation while it follows.
  keepUp() {
    if (!this.following) return;
    const el = this.scroller();
    el.scrollTop = el.scrollHeight;
    this.autoTop = el.scrollTop;
  }

  // startFollowing follows a turn from its start, showing its end.
  startFollowing() {
    this.following = true;
    this.keepUp();
  }

  async loadSessions() {
    try {
      const list = await api("/api/sessions?limit=50");
      clear(this.sessionList);
      if (list.sessions.length === 0) this.sessionList.append(h("li", { class: "muted", text: "No sessions yet." }));
      for (const s of list.sessions) {
        const current = s.id === this.sessionId;
        this.sessionList.append(h("li", {},
          h("a", { href: `#/chat/${s.id}`, "aria-current": current ? "true" : null, class: current ? "current" : null },
            h("span", { class: "s-title", text: s.title || "(untitled)" }),
            h("span", { class: "s-meta muted", text: `${s.context_type.replaceAll("_", " ")} · ${when(s.updated_at)}` }))));
      }
    } catch (err) {
      clear(this.sessionList).append(h("li", { class: "error", text: err.message }));
    }
  }

  async loadProjects() {
    try {
      const list = await api("/api/projects");
      this.projects = list.projects;
    } catch {
      this.projects = [];
    }
    const keep = this.projSel.value;
    clear(this.projSel).append(h("option", { value: "", text: this.projects.length ? "(none)" : "(no projects yet)" }));
    for (const p of this.projects) this.projSel.append(h("option", { value: p.id, text: p.title }));
    this.projSel.value = keep;
  }

  // open shows a session's history ("" for a new chat).
  async open(id) {
    this.sessionId = id;
    clear(this.transcript);
    this.heading.textContent = "New chat";
    this.ctxSel.value = "";
    this.loadSessions();
    if (!id) {
      this.transcript.append(h("p", { class: "empty muted", text: "Ask for something. Work with several parts becomes a plan you can watch run." }));
      this.input.focus();
      return;
    }
    let detail;
    try {
      detail = await api(`/api/sessions/${id}`);
    } catch (err) {
      this.transcript.append(h("p", { class: "error", role: "alert", text: err.message }));
      return;
    }
    if (this.sessionId !== id) return;
    this.heading.textContent = detail.session.title || "Chat";
    this.ctxSel.value = detail.session.context_type || "";
    const meta = detail.session.metadata || {};
    if (meta.focus && meta.focus.project_id) this.projSel.value = meta.focus.project_id;
    await this.history(detail.messages);
    this.prewarm();
  }

  async history(messages) {
    let turn = null;
    const last = messages[messages.length - 1];
    for (const m of messages) {
      if (m.role === "user") {
        turn = new Turn(this, { userText: m.content });
        this.transcript.append(turn.el);
        continue;
      }
      if (m.role !== "assistant") continue;
      if (!turn || turn.answer.hidden === false) {
        turn = new Turn(this, { label: m.plan_id ? "Answer from the approved plan" : "" });
        this.transcript.append(turn.el);
      }
      for (const c of m.tool_calls || []) {
        turn.toolCall({ role: "planner" }, c);
        turn.toolResult({ role: "planner" }, { tool_call_id: c.id, name: c.name, success: c.success, result: c.result, error: c.error });
        if (c.name === "ask_clarifying_questions" && m === last) {
          try { turn.ask((typeof c.arguments === "string" ? JSON.parse(c.arguments) : c.arguments).questions); } catch { /* not questions */ }
        }
      }
      if (m.content) {
        turn.answer.hidden = false;
        turn.answer.textContent = m.content;
      }
      turn.setState([m.interrupted ? `Interrupted (${m.interrupted_reason || "stopped"}).` : "", tokens(m.usage)].filter(Boolean).join(" · "));
      if (m.plan_id && !turn.cards.has(m.plan_id)) {
        try {
          const d = await api(`/api/plans/${m.plan_id}`);
          turn.card({ ...d.plan, executions: d.executions });
          if (d.plan.status === "executing" && !this.running) this.follow(d.plan.id, turn);
        } catch {
          // a plan we cannot read is left out
        }
      }
    }
    this.startFollowing();
  }

  body(text) {
    const runId = newId();
    const body = { message: text, client_turn_id: newId(), stream_run_id: runId };
    if (this.sessionId) body.session_id = this.sessionId;
    const ctx = this.ctxSel.value;
    if (ctx) body.context_type = ctx;
    const project = this.projects.find((p) => p.id === this.projSel.value);
    if (project) {
      body.project_focus = { project_id: project.id, project_name: project.title };
      if (PROJECT_SCOPED.has(ctx)) body.entity_id = project.id;
    }
    if (this.modeSel.value) body.plan_mode = this.modeSel.value;
    return body;
  }

  async send(text) {
    if (this.running) return;
    const body = this.body(text);
    const turn = new Turn(this, { userText: text });
    this.transcript.querySelector(".empty")?.remove();
    this.transcript.append(turn.el);
    turn.setState("Sending…");
    this.startFollowing();
    await this.run({ kind: "turn", runId: body.stream_run_id }, turn, (signal, onEvent) =>
      stream("/api/agent/stream", { body, signal, onEvent }));
  }

  // run streams one run into turn, with the stop button up meanwhile.
  async run(run, turn, start) {
    const controller = new AbortController();
    this.running = { ...run, controller, turn };
    this.lastSeq = 0;
    runs.remember({ kind: run.kind, session_id: this.sessionId, stream_run_id: run.runId || "", plan_id: run.planId || "" });
    this.setBusy(true);
    try {
      await start(controller.signal, (ev, id) => {
        if (id) this.lastSeq = id;
        this.onEvent(turn, ev);
      });
      if (!turn.ended) turn.setState("The stream ended early.");
    } catch (err) {
      if (err.name !== "AbortError" && !this.unloading) turn.fail(err);
    } finally {
      this.running = null;
      if (!this.unloading) runs.forget();
      for (const card of turn.cards.values()) card.render(); // what it offers now that nothing runs
      this.setBusy(false);
      this.loadSessions();
      this.app.refreshInbox();
    }
  }

  onEvent(turn, ev) {
    if (ev.type === "session" && ev.session && ev.session.id !== this.sessionId) {
      this.sessionId = ev.session.id;
      runs.update({ session_id: ev.session.id });
      this.heading.textContent = ev.session.title || "Chat";
      history.replaceState(null, "", `#/chat/${ev.session.id}`);
      this.loadSessions();
    }
    if (ev.type === "context_shift") {
      this.ctxSel.value = ev.new_context;
      this.loadProjects().then(() => { if (ev.entity_id) this.projSel.value = ev.entity_id; });
    }
    if (ev.type === "plan_created" && this.running) runs.update({ plan_id: ev.plan.id });
    turn.apply(ev);
    this.keepUp();
  }

  setBusy(busy) {
    this.stopBtn.hidden = !busy;
    this.stopBtn.disabled = false;
    this.stopBtn.textContent = "Stop";
    this.sendBtn.disabled = busy;
    this.status.textContent = busy ? "Working… (Escape or Stop to cancel)" : "";
    // The composer takes the focus back when a turn ends — unless the
    // person is typing elsewhere (answers to clarifying questions that
    // arrived before the turn's done).
    const typing = document.activeElement && document.activeElement !== document.body && document.activeElement !== this.input &&
      this.root.contains(document.activeElement) && document.activeElement.matches("input, textarea, select");
    if (!busy && !typing) this.input.focus();
  }

  // stop cancels what runs: the turn (stream cancel) or the plan run.
  async stop() {
    const r = this.running;
    if (!r) return;
    this.stopBtn.disabled = true;
    this.stopBtn.textContent = "Stopping…";
    try {
      if (r.kind === "turn") {
        await api("/api/agent/stream/cancel", { method: "POST", body: { stream_run_id: r.runId, reason: "user_cancelled" } });
      } else {
        await api(`/api/plans/${r.planId}/cancel`, { method: "POST" });
      }
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        r.controller.abort(); // the server no longer knows it: stop reading
      } else {
        this.status.textContent = err.message;
        this.stopBtn.disabled = false;
        this.stopBtn.textContent = "Stop";
      }
    }
  }

  // follow watches a plan of this session that is still running.
  async follow(planId, turn) {
    await this.run({ kind: "plan", planId }, turn, (signal, onEvent) =>
      stream(`/api/plans/${planId}/events`, { method: "GET", signal, onEvent }));
  }

  // rejoin picks up what a reload left running (see runs.js).
  async rejoin(run) {
    if (run.session_id && run.session_id !== this.sessionId) {
      location.hash = `#/chat/${run.session_id}`;
      return;
    }
    runs.forget();
    this.status.textContent = "The page was reloaded while a turn ran; looking for what still runs…";
    const turn = new Turn(this, { label: "Rejoined after a reload" });
    let followed = false;
    try {
      const what = run.kind === "turn" && run.stream_run_id ? { kind: "turn", runId: run.stream_run_id } : { kind: "plan", planId: run.plan_id };
      await this.run(what, turn, async (signal, onEvent) => {
        followed = await runs.rejoin(run, {
          signal, onEvent: (ev, id) => {
            if (ev.type === "rejoined_run") {
              if (!turn.el.isConnected) this.transcript.append(turn.el);
              return;
            }
            if (ev.type === "rejoined") {
              if (!turn.el.isConnected) this.transcript.append(turn.el);
              turn.card({ ...ev.plan.plan, executions: ev.plan.executions });
              this.running.planId = ev.plan.plan.id;
              return;
            }
            onEvent(ev, id);
          },
        });
      });
    } finally {
      this.status.textContent = followed ? "" : "Nothing of that turn runs any more; its messages are shown above.";
      // Reopen the session either way: a turn that ended between the
      // page's first load and this look has its answer stored by now.
      if (this.sessionId) this.open(this.sessionId);
    }
  }

  // planActions are a plan card's buttons in chat: a plan waiting for
  // review can be approved or rejected here, or edited on the review page.
  planActions(card, turn) {
    const p = card.plan;
    const mine = !p.user_id || p.user_id === this.app.me.user_id;
    if (p.status === "pending_review" && mine) {
      const reason = h("input", { type: "text", id: `reject-${p.id}`, placeholder: "why not" });
      // A rejection is for good and says why: Reject waits for a reason.
      const reject = h("button", { type: "button", class: "danger-outline", disabled: true,
        onclick: () => reason.value.trim() && this.reject(p.id, reason.value.trim(), turn) }, "Reject");
      reason.addEventListener("input", () => { reject.disabled = !reason.value.trim(); });
      return [
        h("button", { type: "button", class: "primary", onclick: () => this.approve(p.id, p.version) }, "Approve and run"),
        h("a", { href: `#/review/${p.id}`, class: "button" }, "Review and edit"),
        h("span", { class: "inline-field" }, h("label", { for: `reject-${p.id}`, text: "Reason" }), reason, reject),
      ];
    }
    if (["failed", "cancelled", "interrupted", "stopped_budget"].includes(p.status) && mine && !this.running) {
      return [h("button", { type: "button", onclick: () => this.resume(p.id) }, "Resume")];
    }
    if (mine && !this.running) return raiseActions(card, (limits) => this.raise(p.id, limits));
    return [];
  }

  // approve runs a plan as the version the card shows: one that changed
  // since is refused (409) and the card is redrawn.
  async approve(planId, version) {
    if (this.running) return;
    const turn = new Turn(this, { label: "You approved the plan; it runs now." });
    this.transcript.append(turn.el);
    this.startFollowing();
    const detail = await api(`/api/plans/${planId}`).catch(() => null);
    if (detail) turn.card(detail.plan);
    await this.run({ kind: "plan", planId }, turn, (signal, onEvent) =>
      stream(`/api/plans/${planId}/approve`, { body: version ? { version } : {}, signal, onEvent }));
    this.refreshCards(planId);
  }

  resume(planId) {
    return this.goOn(planId, "resume", {}, "Resumed the plan.");
  }

  // raise raises a paused plan's budget, which runs it on.
  async raise(planId, limits) {
    // A refused raise (400) is the form's to show, before any turn.
    await this.goOn(planId, "budget", limits, "You raised the budget; the plan goes on.", true);
  }

  // goOn runs a plan on through one of its control routes (resume, budget),
  // streaming the run into a turn of its own; with rethrow an answer that
  // refuses it is thrown before the turn is drawn.
  async goOn(planId, route, body, label, rethrow) {
    if (this.running) return;
    const turn = new Turn(this, { label });
    const detail = await api(`/api/plans/${planId}`).catch(() => null);
    if (detail) turn.card(detail.plan);
    let shown = false;
    const show = () => {
      if (shown) return;
      shown = true;
      this.transcript.append(turn.el);
      this.startFollowing();
    };
    if (!rethrow) show();
    let refused = null;
    await this.run({ kind: "plan", planId }, turn, async (signal, onEvent) => {
      try {
        await stream(`/api/plans/${planId}/${route}`, { body, signal, onEvent: (ev, id) => { show(); onEvent(ev, id); } });
      } catch (err) {
        if (!rethrow || shown || !(err instanceof ApiError)) throw err;
        refused = err;
        turn.ended = true;
      }
    });
    if (refused) throw refused; // nothing changed: the cards stay as they are
    this.refreshCards(planId);
  }

  async reject(planId, reason, turn) {
    try {
      await api(`/api/plans/${planId}/reject`, { method: "POST", body: { reason } });
    } catch (err) {
      turn.extra.append(h("p", { class: "error", role: "alert", text: err.message }));
      return;
    }
    this.refreshCards(planId);
    this.app.refreshInbox();
  }

  // refreshCards redraws every card of a plan from the stored plan.
  async refreshCards(planId) {
    let d;
    try {
      d = await api(`/api/plans/${planId}`);
    } catch {
      return;
    }
    for (const card of this.cards(planId)) card.setPlan({ ...d.plan, executions: d.executions });
  }

  *cards(planId) {
    for (const el of this.transcript.querySelectorAll(`.plan-card[data-plan-id="${planId}"]`)) {
      if (el.card) yield el.card;
    }
  }

  // prewarm asks the server to build the session's context ahead of the
  // next turn, where the server offers it (POST /api/agent/prewarm).
  async prewarm() {
    if (this.noPrewarm) return;
    const body = {};
    if (this.sessionId) body.session_id = this.sessionId;
    if (this.ctxSel.value) body.context_type = this.ctxSel.value;
    const project = this.projects.find((p) => p.id === this.projSel.value);
    if (project) {
      body.project_focus = { project_id: project.id, project_name: project.title };
      if (PROJECT_SCOPED.has(this.ctxSel.value)) body.entity_id = project.id;
    }
    try {
      await api("/api/agent/prewarm", { method: "POST", body });
    } catch (err) {
      if (err.status === 404 || err.status === 405) this.noPrewarm = true; // this server has no prewarm
    }
  }
}
