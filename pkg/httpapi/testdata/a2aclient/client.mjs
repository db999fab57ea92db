// The official A2A JavaScript SDK's client against planwright's A2A agent:
// node client.mjs <base url> <api key> <another user's key>
// It creates its clients from the agent card (ClientFactory.createFromUrl),
// then sends, streams, cuts a stream and resubscribes, cancels, and reads
// another user's task. It prints one JSON document of what it saw (tasks
// and stream events in their v1.0 JSON form); TestA2AOfficialJavaScriptClient
// checks it. Any failure exits non-zero with the error on stderr.
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { AgentCard, Role, StreamResponse, Task } from "@a2a-js/sdk";

const [baseURL, key, otherKey] = process.argv.slice(2);

// connect reads the card at baseURL and makes a client that sends secret.
async function connect(secret) {
  const fetchImpl = (url, init = {}) =>
    fetch(url, { ...init, headers: { ...init.headers, Authorization: `Bearer ${secret}` } });
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
  });
  return new ClientFactory(options).createFromUrl(baseURL);
}

let n = 0;
function message(text, extra = {}) {
  n++;
  return {
    messageId: `js-${n}`,
    contextId: "",
    taskId: "",
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text }, filename: "", mediaType: "" }],
    extensions: [],
    referenceTaskIds: [],
    ...extra,
  };
}

const out = {};
const client = await connect(key);
out.card = AgentCard.toJSON(client.agentCard);

// SendMessage waits for the answer.
out.answer = Task.toJSON(await client.sendMessage({ message: message("What is the capital of France?") }));

// SendStreamingMessage of a draft plan, to its end.
out.draftEvents = [];
for await (const ev of client.sendMessageStream({
  message: message("plan the launch"),
  metadata: { plan_mode: "draft_only" },
})) {
  out.draftEvents.push(StreamResponse.toJSON(ev));
}

// A long task: the stream is cut after its first event, the task goes on;
// a resubscription follows it, and a cancel ends it.
const cut = new AbortController();
let taskID;
try {
  for await (const ev of client.sendMessageStream({ message: message("take your time") }, { signal: cut.signal })) {
    taskID = ev.payload.value.id; // the first event is the task
    cut.abort();
    break;
  }
} catch (e) {
  if (e.name !== "AbortError") throw e;
}
out.cutTask = Task.toJSON(await client.getTask({ id: taskID }));
out.resubscribed = [];
let canceled;
for await (const ev of client.resubscribeTask({ id: taskID })) {
  out.resubscribed.push(StreamResponse.toJSON(ev));
  if (!canceled) canceled = client.cancelTask({ id: taskID });
}
out.canceled = Task.toJSON(await canceled);

// Another user sees none of it.
const other = await connect(otherKey);
try {
  await other.getTask({ id: taskID });
  out.otherGetTask = "found";
} catch (e) {
  out.otherGetTask = e.name;
}
try {
  await client.cancelTask({ id: taskID });
  out.cancelAgain = "canceled";
} catch (e) {
  out.cancelAgain = e.name;
}

process.stdout.write(JSON.stringify(out));
