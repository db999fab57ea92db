// The usage page of operations: what model calls used and cost
// (GET /api/usage: the caller's own by day and model; an operator's by
// user too, everyone's unless a user is named), over a period, grouped by
// day, model or user, with the totals.
import { api } from "./api.js";
import { h, clear, money, announce, count } from "./dom.js";

const GROUPS = [["day,model", "day and model"], ["day", "day"], ["model", "model"]];
const OPERATOR_GROUPS = [["user", "user"], ["user,model", "user and model"], ["day,model,user", "day, model and user"]];
const COLUMNS = { day: "Day", model: "Model", user_id: "User" };
const FIGURES = [["model_calls", "Model calls"], ["input_tokens", "Input tokens"], ["output_tokens", "Output tokens"],
  ["total_tokens", "Total tokens"], ["cost_usd", "Cost"]];

// The page's choices, kept while the app is open.
const filters = { since: "", until: "", group: "day,model", user_id: "" };

const isoOf = (local) => new Date(local).toISOString().replace(/\.\d{3}Z$/, "Z");

// grouped adds up the rows that share the keys.
function grouped(rows, keys) {
  const out = new Map();
  for (const r of rows) {
    const key = keys.map((k) => r[k] || "").join("\u0000");
    let g = out.get(key);
    if (!g) {
      g = Object.fromEntries([...keys.map((k) => [k, r[k] || ""]), ...FIGURES.map(([f]) => [f, 0])]);
      out.set(key, g);
    }
    for (const [f] of FIGURES) g[f] += r[f] || 0;
  }
  // The newest day first; models and users by name.
  return [...out.values()].sort((a, b) => (b.day || "").localeCompare(a.day || "") || (a.model || "").localeCompare(b.model || "") ||
    (a.user_id || "").localeCompare(b.user_id || ""));
}

const figure = (f, v) => (f === "cost_usd" ? money(v) : String(v));

export function usagePage(root, app) {
  clear(root);
  const operator = app.isOperator();
  const groups = operator ? [...GROUPS, ...OPERATOR_GROUPS] : GROUPS;
  if (!groups.some(([v]) => v === filters.group)) filters.group = "day,model";
  const field = (name, label, el) => h("div", { class: "field" }, h("label", { for: `u-${name}`, text: label }), el);
  const form = h("form", { class: "filters", "aria-label": "Usage period and grouping" },
    field("since", "From", h("input", { id: "u-since", name: "since", type: "datetime-local", value: filters.since })),
    field("until", "Until", h("input", { id: "u-until", name: "until", type: "datetime-local", value: filters.until })),
    field("group", "Group by", h("select", { id: "u-group", name: "group" },
      groups.map(([v, t]) => h("option", { value: v, text: t, selected: filters.group === v })))),
    operator ? field("user_id", "User", h("input", { id: "u-user_id", name: "user_id", type: "text", value: filters.user_id, placeholder: "every user" })) : null,
    h("div", { class: "field buttons" }, h("button", { type: "submit", class: "primary" }, "Show")));
  const period = h("p", { class: "muted usage-period" });
  const table = h("div", { class: "plans-table usage-table" });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    for (const el of form.elements) if (el.name) filters[el.name] = el.value;
    load();
  });
  form.querySelector("#u-group").addEventListener("change", (e) => {
    filters.group = e.target.value;
    load();
  });
  root.append(h("p", {}, h("a", { href: "#/ops" }, "← Plans")),
    h("div", { class: "ops-head" }, h("h1", { text: "Usage and cost" }),
      h("span", { class: "muted whose", text: operator ? "every user's model calls" : "your model calls" })),
    form, period, table);

  async function load() {
    const q = new URLSearchParams();
    if (filters.since) q.set("since", isoOf(filters.since));
    if (filters.until) q.set("until", isoOf(filters.until));
    if (operator && filters.user_id.trim()) q.set("user_id", filters.user_id.trim());
    let data;
    try {
      data = await api(`/api/usage?${q}`);
    } catch (err) {
      clear(table).append(h("p", { class: "error", role: "alert", text: err.message }));
      return;
    }
    if (!table.isConnected) return;
    period.textContent = `From ${new Date(data.since).toLocaleString()} until ${new Date(data.until).toLocaleString()} (days in UTC)`;
    const keys = filters.group.split(",").map((k) => (k === "user" ? "user_id" : k));
    const rows = grouped(data.usage, keys);
    if (rows.length === 0) {
      clear(table).append(h("p", { class: "empty", text: "No model call in this period." }));
      announce("no usage");
      return;
    }
    const total = grouped(data.usage, [])[0];
    const cells = (r, head) => [
      ...keys.map((k) => (head ? h("th", { scope: "row", "data-label": COLUMNS[k], "data-col": k, text: r[k] || "(unnamed)" }) : null)),
      ...FIGURES.map(([f, label]) => h("td", { "data-label": label, "data-col": f, "data-value": String(r[f]), class: "num", text: figure(f, r[f]) })),
    ];
    clear(table).append(h("table", { class: "usage" },
      h("caption", { class: "sr-only", text: `Usage by ${filters.group.replaceAll(",", ", ")}` }),
      h("thead", {}, h("tr", {}, [...keys.map((k) => COLUMNS[k]), ...FIGURES.map(([, l]) => l)].map((c) => h("th", { scope: "col", text: c })))),
      h("tbody", {}, rows.map((r) => h("tr", { "data-key": keys.map((k) => r[k]).join("/") }, cells(r, true)))),
      h("tfoot", {}, h("tr", { class: "total" }, h("th", { scope: "row", colspan: keys.length, text: "Total" }), cells(total, false)))));
    announce(count(rows.length, "row"));
  }
  load();
}
