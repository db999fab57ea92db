// The run this tab streams, remembered in sessionStorage so that a reload
// can find it again.
//
// A turn goes on when its page reloads (the server's on_disconnect is
// continue): the reloaded page follows the turn's run again through
// GET /api/runs/{id}/events, from the start so that the turn is drawn
// whole, handing every event to the same onEvent as the live stream. A
// plan of the session that still runs is followed through
// GET /api/plans/{id}/events.
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
  // A turn goes on after its client left (on_disconnect continue): follow
  // its run's log from the start, so the turn is drawn whole again.
  if (run.kind === "turn" && run.stream_run_id) {
    const path = `/api/runs/${encodeURIComponent(run.stream_run_id)}`;
    let info = null;
    try {
      info = await api(path, { signal });
    } catch (err) {
      if (err.name === "AbortError") throw err;
    }
    if (info && info.status === "running") {
      onEvent({ type: "rejoined_run", run: info });
      await stream(`${path}/events`, { method: "GET", signal, onEvent });
      return true;
    }
  }
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
