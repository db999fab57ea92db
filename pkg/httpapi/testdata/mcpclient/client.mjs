// The official MCP TypeScript SDK's client against planwright's /mcp:
// node client.mjs <mcp url> <api key> <another user's key>
// It prints one JSON document of what it saw; TestMCPOfficialTypeScriptClient
// checks it. Any failure exits non-zero with the error on stderr.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key, otherKey] = process.argv.slice(2);

async function connect(secret) {
  const client = new Client({ name: "planwright-ts-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${secret}` } },
  });
  await client.connect(transport);
  return client;
}

const out = {};
const client = await connect(key);
out.server = client.getServerVersion()?.name;
out.tools = (await client.listTools()).tools.map((t) => t.name).sort();

const progress = [];
const answer = await client.callTool(
  { name: "start_task", arguments: { message: "What is the capital of France?", wait_seconds: 20 } },
  undefined,
  { onprogress: (p) => progress.push(p.message) },
);
out.answer = answer.structuredContent;
out.progress = progress;

const draft = await client.callTool({
  name: "start_task",
  arguments: { message: "plan the launch", plan_mode: "draft_only", wait_seconds: 20 },
});
const planID = draft.structuredContent.plan_id;
out.draft = draft.structuredContent;
out.plan = (await client.callTool({ name: "get_plan", arguments: { plan_id: planID } })).structuredContent;
out.rejectWithoutReason = await client.callTool({ name: "reject_plan", arguments: { plan_id: planID } });

const other = await connect(otherKey);
out.otherGetPlan = await other.callTool({ name: "get_plan", arguments: { plan_id: planID } });
await other.close();

out.rejected = (await client.callTool({ name: "reject_plan", arguments: { plan_id: planID, reason: "not this quarter" } })).structuredContent;
await client.close();

try {
  await connect("pwk_notakey");
  out.badKey = "connected";
} catch (err) {
  out.badKey = String(err?.message ?? err);
}

process.stdout.write(JSON.stringify(out));
