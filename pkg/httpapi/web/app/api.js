// The HTTP API: JSON calls and event streams, with the API key kept for
// this tab only (sessionStorage). Errors carry the server's own words.
import { readEvents } from "./sse.js";

const KEY = "planwright.key";

export const apiKey = () => sessionStorage.getItem(KEY) || "";
export const setApiKey = (k) => sessionStorage.setItem(KEY, k);
export const clearApiKey = () => sessionStorage.removeItem(KEY);

// ApiError is an error answer of the server: {error: {code, message, fields}}.
export class ApiError extends Error {
  constructor(status, code, message, fields) {
    super(message);
    this.status = status;
    this.code = code;
    this.fields = fields || [];
  }
}

function headers(json, key) {
  const h = { Accept: "application/json" };
  if (json) h["Content-Type"] = "application/json";
  const k = key ?? apiKey();
  if (k) h.Authorization = "Bearer " + k;
  return h;
}

async function errorOf(res) {
  let body = null;
  try {
    body = await res.json();
  } catch {
    // not JSON: fall back to the status line
  }
  const e = body && body.error;
  if (e) return new ApiError(res.status, e.code, e.message, e.fields);
  return new ApiError(res.status, "http_" + res.status, res.statusText || "request failed");
}

// api calls a JSON route and returns the decoded answer.
export async function api(path, { method = "GET", body, signal, key } = {}) {
  let res;
  try {
    res = await fetch(path, {
      method, signal, headers: headers(body !== undefined, key),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, "network", "the server cannot be reached: " + err.message);
  }
  if (!res.ok) {
    if (res.status === 401 && key === undefined) window.dispatchEvent(new CustomEvent("planwright:unauthorized"));
    throw await errorOf(res);
  }
  if (res.status === 204) return null;
  return res.json();
}

// stream calls a route that answers with Server-Sent Events and hands each
// event to onEvent; it resolves with the last event id when the stream
// ends. An error answer before the stream (400, 404, 409, 429) is thrown as
// an ApiError.
export async function stream(path, { method = "POST", body, signal, onEvent, lastEventId } = {}) {
  const h = headers(body !== undefined);
  h.Accept = "text/event-stream";
  if (lastEventId) h["Last-Event-ID"] = lastEventId;
  let res;
  try {
    res = await fetch(path, { method, signal, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, "network", "the server cannot be reached: " + err.message);
  }
  if (!res.ok) throw await errorOf(res);
  return readEvents(res.body, onEvent);
}

// newId returns a random UUID (v4); crypto.randomUUID needs a secure
// context, getRandomValues does not.
export function newId() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, "0")).join("");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}
