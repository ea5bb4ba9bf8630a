// Run by node with the official TypeScript SDK: one session over Streamable HTTP.
//
// Usage: node ts_http_session.mjs URL
// Lists the tools, calls once, calls with progress, cancels a long call once it
// runs, calls again, lists and reads the artifact of a big output, pings. Prints
// one JSON object: what each step gave, and what the SDK reported through `onerror`.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url] = process.argv.slice(2);
const report = { errors: [], raised: null, first: null, progressed: 0, counted: null };
Object.assign(report, { cancelled: null, next: null, listed: false, read: null });
const transport = new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: "ts-http", version: "0" });
client.onerror = (error) => report.errors.push(String(error));

try {
  await client.connect(transport);
  await client.listTools();
  const first = await client.callTool({ name: "bash", arguments: { command: "echo first" } });
  report.first = first.content[0].text;
  const counted = await client.callTool(
    { name: "bash", arguments: { command: "for i in 1 2 3; do echo $i; sleep 0.3; done" } },
    undefined,
    { onprogress: () => (report.progressed += 1) },
  );
  report.counted = counted.content[0].text;
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
  const big = await client.callTool({ name: "bash", arguments: { command: "seq 1 100000" } });
  const uri = `artifact://${big.structuredContent.truncation.artifactId}`;
  const listed = await client.listResources();
  report.listed = listed.resources.some((r) => r.uri === uri);
  const read = await client.readResource({ uri });
  report.read = read.contents[0].text;
  await client.ping();
  await transport.terminateSession();
  await client.close();
} catch (error) {
  report.raised = String(error && error.stack ? error.stack : error);
}
process.stdout.write(JSON.stringify(report) + "\n");
