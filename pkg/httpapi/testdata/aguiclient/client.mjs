// The official AG-UI client (@ag-ui/client's HttpAgent) against
// planwright's /api/ag-ui: node client.mjs <endpoint url> <api key> <another user's key> [tools]
// (tools: the tool-call scenario, against a server whose send_mail waits
// for approval). It prints one JSON document of what it saw; TestAGUIOfficialClient
// checks it. Any failure exits non-zero with the error on stderr.
import { HttpAgent } from "@ag-ui/client";

const [url, key, otherKey, scenario] = process.argv.slice(2);

function agent(secret, threadId) {
  // threadId "": planwright starts a new session and names it in RUN_STARTED.
  return new HttpAgent({ url, headers: { Authorization: `Bearer ${secret}` }, threadId });
}

// run runs a, collecting its events; stop(event) may abort the stream.
async function run(a, params, stop) {
  const events = [];
  let error;
  try {
    await a.runAgent(params, {
      onEvent: ({ event }) => {
        events.push(event);
        if (stop?.(event)) a.abortRun();
      },
    });
  } catch (e) {
    error = String(e);
  }
  return { types: events.map((e) => e.type), events, error };
}

const text = (r) => r.events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");
const last = (r) => r.events[r.events.length - 1];

const out = {};

if (scenario === "tools") {
  // Calls that wait for approval end each run with their interrupts; the
  // client answers all it holds (approving every one) until the run ends.
  const a = agent(key, "");
  a.addMessage({ id: "t1", role: "user", content: "mail my friends" });
  const rounds = [await run(a, { runId: "ts-mail-1" })];
  a.threadId = rounds[0].events[0].threadId;
  while (a.pendingInterrupts.length > 0 && rounds.length < 5) {
    rounds.push(await run(a, {
      runId: `ts-mail-${rounds.length + 1}`,
      resume: a.pendingInterrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: { decision: "approve" } })),
    }));
  }
  out.rounds = rounds.map((r) => ({ types: r.types, outcome: last(r)?.outcome, error: r.error, text: text(r) }));
  out.pending = a.pendingInterrupts.map((i) => i.id);
  out.toolMessages = a.messages.filter((m) => m.role === "tool").map((m) => m.content);
  process.stdout.write(JSON.stringify(out));
  process.exit(0);
}

// A question: the planner's answer, streamed.
const alice = agent(key, "");
alice.addMessage({ id: "u1", role: "user", content: "What is the capital of France?" });
const answer = await run(alice, { runId: "ts-answer-1" });
out.answer = { types: answer.types, text: text(answer), threadId: answer.events[0]?.threadId, error: answer.error };
alice.threadId = answer.events[0].threadId; // continue the thread

// A draft plan in the same thread: the run ends with the review interrupt,
// the plan in the agent's state.
alice.addMessage({ id: "u2", role: "user", content: "plan the launch" });
const draft = await run(alice, { runId: "ts-draft-1", forwardedProps: { plan_mode: "draft_only" } });
out.draft = { types: draft.types, outcome: last(draft)?.outcome, threadId: draft.events[0]?.threadId, error: draft.error,
  state: alice.state, pending: alice.pendingInterrupts.map((i) => i.id) };

// The resume approves the plan: its steps run.
const resumed = await run(alice, {
  runId: "ts-resume-1",
  resume: alice.pendingInterrupts.map((i) => ({ interruptId: i.id, status: "resolved" })),
});
out.resumed = { types: resumed.types, outcome: last(resumed)?.outcome, error: resumed.error, state: alice.state };

// A cut connection: the stream is aborted at RUN_STARTED, before the
// answer; the run goes on, and a rejoin (the same runId, another agent)
// reads it whole.
const cut = agent(key, "");
cut.addMessage({ id: "u3", role: "user", content: "Answer slowly: the capital of France?" });
const first = await run(cut, { runId: "ts-cut-1" }, (e) => e.type === "RUN_STARTED");
const rejoin = agent(key, first.events[0].threadId);
rejoin.addMessage({ id: "u3", role: "user", content: "Answer slowly: the capital of France?" });
const again = await run(rejoin, { runId: "ts-cut-1" });
out.cut = { types: first.types, error: first.error };
out.rejoin = { types: again.types, text: text(again), error: again.error };

// Another user's thread, and a bad key, are refused.
const bob = agent(otherKey, alice.threadId);
bob.addMessage({ id: "b1", role: "user", content: "hi" });
out.otherThread = (await run(bob, { runId: "ts-bob-1" })).error;
const bad = agent("pw_not-a-key", "");
bad.addMessage({ id: "x1", role: "user", content: "hi" });
out.badKey = (await run(bad, { runId: "ts-bad-1" })).error;

process.stdout.write(JSON.stringify(out));
