// Small DOM helpers: elements are built with h() (text is always set as
// text, never parsed as HTML), and values are formatted for people.

const SVGNS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else if (k === "class") el.setAttribute("class", Array.isArray(v) ? v.filter(Boolean).join(" ") : v);
    else if (k === "value" || k === "checked" || k === "selected" || k === "disabled" && el.namespaceURI !== SVGNS) el[k] = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// h builds an HTML element: h("button", {class: "x", onclick}, "Text").
export const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);

// s builds an SVG element.
export const s = (tag, attrs, ...children) => build(document.createElementNS(SVGNS, tag), attrs, children);

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

// announce tells screen readers about something that happened.
export function announce(text) {
  const live = document.getElementById("announcer");
  if (live) {
    live.textContent = "";
    setTimeout(() => { live.textContent = text; }, 30);
  }
}

export function duration(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return "";
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  const sec = ms / 1000;
  if (sec < 60) return `${sec.toFixed(1)} s`;
  const m = Math.floor(sec / 60);
  const rest = Math.round(sec % 60);
  if (m < 60) return `${m} min ${rest} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  const today = new Date();
  const sameDay = d.toDateString() === today.toDateString();
  return sameDay ? d.toLocaleTimeString() : d.toLocaleString();
}

// money writes US dollars: cents from a cent up, the first digits that
// count below it.
export function money(usd) {
  if (typeof usd !== "number" || Number.isNaN(usd)) return "";
  if (usd === 0 || usd >= 0.01) return `$${usd.toFixed(2)}`;
  if (usd < 0.000001) return "< $0.000001";
  return `$${usd.toFixed(6).replace(/0+$/, "")}`;
}

// goDuration reads a Go duration ("1h2m3.5s", "90s", "500ms") as
// milliseconds; NaN when it is not one.
export function goDuration(text) {
  const t = String(text || "").trim();
  if (t === "0") return 0;
  const unit = { h: 3600000, m: 60000, s: 1000, ms: 1, us: 0.001, "µs": 0.001, ns: 0.000001 };
  const re = /(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)/gy;
  let ms = 0, m, end = 0;
  while ((m = re.exec(t))) {
    ms += Number(m[1]) * unit[m[2]];
    end = re.lastIndex;
  }
  return end > 0 && end === t.length ? ms : NaN;
}

export const tokens = (u) => (u ? `${(u.input_tokens || 0) + (u.output_tokens || 0)} tokens (${u.input_tokens || 0} in, ${u.output_tokens || 0} out)` : "");

// count says how many of a thing there are: "1 step", "3 steps".
export const count = (n, one, many = one + "s") => `${n} ${n === 1 ? one : many}`;

export function shortId(id) {
  return id ? String(id).slice(-8) : "";
}

// statusBadge is a status word with its colour (never colour alone).
export const statusBadge = (status) => h("span", { class: ["badge", "st-" + status], text: String(status || "").replaceAll("_", " ") });

// jsonText renders arguments compactly for one line.
export function jsonText(v, max = 160) {
  let t;
  try {
    t = typeof v === "string" ? v : JSON.stringify(v);
  } catch {
    t = String(v);
  }
  if (t === undefined) t = "";
  return t.length > max ? t.slice(0, max - 1) + "…" : t;
}

// sourceLabel names who produced an event: the planner, step N's executor,
// the reviewer.
export function sourceLabel(src) {
  if (!src) return "";
  switch (src.role) {
    case "executor": return src.step_number ? `step ${src.step_number}` : "executor";
    case "planner": return "planner";
    case "reviewer": return "reviewer";
    case "synthesizer": return "answer";
    case "replanner": return "replanner";
    default: return src.step_number ? `step ${src.step_number}` : "system";
  }
}
