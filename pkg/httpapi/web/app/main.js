// The web app: sign-in, the three sections (chat, review, operations) and
// the hash router (#/chat/ID, #/review/ID, #/ops, #/ops/plan/ID,
// #/ops/exec/ID, #/ops/usage). Each section is built once and kept, so a chat turn that
// streams goes on while another section is open.
import { api, apiKey, setApiKey, clearApiKey, ApiError } from "./api.js";
import { h, clear } from "./dom.js";
import { ChatView } from "./chat.js";
import { ReviewView } from "./review.js";
import { OpsView } from "./ops.js";

const $ = (id) => document.getElementById(id);

export const app = {
  me: null, // {user_id, role, auth_mode, trace_url?}
  views: {},
  isOperator() { return this.me && this.me.role === "operator"; },
  // whose says whose a thing is, from the signed-in user's point of view.
  whose(userId) { return this.me && userId === this.me.user_id ? "you" : userId; },
  refreshInbox,
};

async function boot() {
  try {
    app.me = await api("/api/me");
  } catch (err) {
    $("loading").hidden = true;
    if (err instanceof ApiError && err.status === 401) {
      showSignIn(apiKey() ? "Your key was not accepted: " + err.message : "");
      return;
    }
    $("loading").textContent = "The server cannot be reached: " + err.message;
    $("loading").hidden = false;
    return;
  }
  $("loading").hidden = true;
  $("signin").hidden = true;
  $("nav").hidden = false;
  renderWho();
  if (!app.views.chat) {
    app.views.chat = new ChatView($("view-chat"), app);
    app.views.review = new ReviewView($("view-review"), app);
    app.views.ops = new OpsView($("view-ops"), app);
  }
  route();
  refreshInbox();
  setInterval(refreshInbox, 10000);
}

function renderWho() {
  const who = clear($("who"));
  const me = app.me;
  who.append(h("span", { class: "me" }, h("span", { class: "sr-only", text: "Signed in as " }), h("strong", { text: me.user_id }),
    ` · ${me.role}`, me.role === "operator" ? h("span", { class: "muted", text: " (sees every user's plans)" }) : ""));
  if (me.auth_mode !== "none") {
    who.append(h("button", { type: "button", class: "link", onclick: signOut }, "Sign out"));
  }
}

function showSignIn(message) {
  for (const v of document.querySelectorAll(".view")) v.hidden = true;
  $("nav").hidden = true;
  clear($("who"));
  $("signin").hidden = false;
  $("signin-error").textContent = message || "";
  $("api-key").focus();
}

function signOut() {
  clearApiKey();
  location.hash = "#/chat";
  location.reload();
}

$("signin-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const key = $("api-key").value.trim();
  try {
    await api("/api/me", { key });
  } catch (err) {
    $("signin-error").textContent = err.message;
    return;
  }
  setApiKey(key);
  $("api-key").value = "";
  boot();
});

window.addEventListener("planwright:unauthorized", () => showSignIn("Your key is no longer accepted. Sign in again."));

async function refreshInbox() {
  if (!app.me) return;
  try {
    const [list, holds] = await Promise.all([api("/api/plans?status=pending_review&limit=100"), api("/api/tool-approvals")]);
    const n = list.plans.length + holds.decisions.length;
    const badge = $("review-count");
    badge.hidden = n === 0;
    badge.textContent = n >= 100 ? "99+" : String(n);
    badge.setAttribute("aria-label", `${n} waiting`);
  } catch {
    // the badge is a hint; the review page reports errors
  }
}

function route() {
  if (!app.me) return;
  const parts = (location.hash || "#/chat").replace(/^#\/?/, "").split("/");
  const section = ["chat", "review", "ops"].includes(parts[0]) ? parts[0] : "chat";
  for (const [name, view] of Object.entries(app.views)) {
    view.root.hidden = name !== section;
  }
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  app.views[section].show(parts.slice(1));
  refreshInbox();
  document.title = `planwright · ${{ chat: "Chat", review: "Review", ops: "Operations" }[section]}`;
}

window.addEventListener("hashchange", route);
boot();
