// The run this tab streams, remembered in sessionStorage so that a reload
// can find it again.
//
// Today a stream belongs to its HTTP request: when the page reloads, the
// request ends and the server cancels the turn (its partial answer is
// stored, marked interrupted). What a reloaded page can do with the current
// API is: reload the session's messages, and follow a plan of the session
// that is still running through GET /api/plans/{id}/events.
//
// Once the run log exists (GET /api/runs/{id}/events with Last-Event-ID,
// and turns that go on after a disconnect), rejoin becomes:
//   stream(`/api/runs/${run.stream_run_id}/events`, {method: "GET", lastEventId: run.seq, onEvent})
// and nothing else here changes: callers already hand every event to the
// same onEvent as the live stream.
import { api, stream } from "./api.js";

const KEY = "planwright.run";

// remember records the run being streamed: {kind: "turn"|"plan",
// session_id, stream_run_id, plan_id, seq}.
export function remember(run) {
  sessionStorage.setItem(KEY, JSON.stringify({ ...run, at: Date.now() }));
}

export function update(fields) {
  const run = pending();
  if (run) remember({ ...run, ...fields });
}

export function forget() {
  sessionStorage.removeItem(KEY);
}

export function pending() {
  try {
    return JSON.parse(sessionStorage.getItem(KEY) || "null");
  } catch {
    return null;
  }
}

// rejoin follows what is still running of a remembered run, handing its
// events to onEvent. It resolves with true when it followed something.
export async function rejoin(run, { onEvent, signal }) {
  let planId = run.plan_id;
  if (!planId && run.session_id) {
    const list = await api(`/api/plans?session_id=${encodeURIComponent(run.session_id)}&status=executing&limit=1`, { signal });
    planId = list.plans.length ? list.plans[0].id : "";
  }
  if (!planId) return false;
  const detail = await api(`/api/plans/${planId}`, { signal });
  if (detail.plan.status !== "executing") return false;
  onEvent({ type: "rejoined", plan: detail });
  await stream(`/api/plans/${planId}/events`, { method: "GET", signal, onEvent });
  return true;
}
