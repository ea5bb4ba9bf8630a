// Run by node with the official TypeScript SDK: cancel a tool call, as editors do.
//
// Usage: node ts_cancelled_call.mjs SERVER_PYTHON ARTIFACTS_DIR
// Lists the tools (the SDK then checks each result against the output schema),
// calls once, starts a long call and aborts it once it runs (the SDK sends
// `notifications/cancelled`), then calls again and pings. Prints one JSON object:
// what the SDK reported through `onerror` (a response to a request it cancelled is
// one), how the cancelled call ended, and the texts of both calls.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [serverPython, artifacts] = process.argv.slice(2);
const report = { errors: [], first: null, cancelled: null, next: null, raised: null };
const transport = new StdioClientTransport({
  command: serverPython,
  args: ["-m", "bashrpc", "--artifacts-dir", artifacts],
  env: { PATH: process.env.PATH, HOME: process.env.HOME },
  stderr: "ignore",
});
const client = new Client({ name: "ts-cancel", version: "0" });
client.onerror = (error) => report.errors.push(String(error));

try {
  await client.connect(transport);
  await client.listTools();
  const first = await client.callTool({ name: "bash", arguments: { command: "echo first" } });
  report.first = first.content[0].text;
  const controller = new AbortController();
  const running = client.callTool(
    { name: "bash", arguments: { command: "echo started; sleep 60" } },
    undefined,
    { signal: controller.signal, onprogress: () => controller.abort("test") },
  );
  try {
    await running;
    report.cancelled = "answered";
  } catch (error) {
    report.cancelled = String(error);
  }
  const next = await client.callTool({ name: "bash", arguments: { command: "echo still healthy" } });
  report.next = next.content[0].text;
  await client.ping();
  await client.close();
} catch (error) {
  report.raised = String(error && error.stack ? error.stack : error);
}
process.stdout.write(JSON.stringify(report) + "\n");
