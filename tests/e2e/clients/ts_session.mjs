// Run by node with the official TypeScript SDK: one session at one MCP revision,
// over stdio or Streamable HTTP.
//
// Usage: node ts_session.mjs SERVER_PYTHON ARTIFACTS_DIR REVISION   (stdio)
//        node ts_session.mjs URL REVISION                           (Streamable HTTP)
// The SDK asks for its latest revision; the initialize it sends is rewritten to
// ask for REVISION, which the server answers with and the SDK accepts (over HTTP
// it then names it in MCP-Protocol-Version). Then: list, a call with progress, a
// call aborted once it runs (the SDK sends `notifications/cancelled`, and reports
// a response to it through `onerror`: there must be none), another call, a big
// output read back as a resource, a ping; over HTTP the session ends with DELETE.
// Prints one JSON object of what it saw and what the SDK reported.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const args = process.argv.slice(2);
const http = args[0].startsWith("http://");
const revision = http ? args[1] : args[2];
const report = { errors: [], raised: null };
const transport = http
  ? new StreamableHTTPClientTransport(new URL(args[0]))
  : new StdioClientTransport({
      command: args[0],
      args: ["-m", "bashrpc", "--artifacts-dir", args[1]],
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
      stderr: "ignore",
    });
const send = transport.send.bind(transport);
transport.send = (message, options) => {
  if (message.method === "initialize") message.params.protocolVersion = revision;
  return send(message, options);
};
// The revision the server answered with, read as the SDK receives it.
let receive;
Object.defineProperty(transport, "onmessage", {
  get: () => receive,
  set: (handler) => {
    receive = (message, extra) => {
      if (message.result?.protocolVersion) report.version = message.result.protocolVersion;
      return handler?.(message, extra);
    };
  },
});
const client = new Client({ name: "ts-session", version: "0" });
client.onerror = (error) => report.errors.push(String(error));

try {
  await client.connect(transport);
  report.icons = (client.getServerVersion().icons ?? []).length;
  report.tools = (await client.listTools()).tools.map((tool) => tool.name);
  // The SDK runs notification handlers a microtask later than it settles a
  // response: progress read in the same chunk as its call's response is reported
  // as for an unknown token. The pause after the output keeps them apart.
  let progress = 0;
  const called = await client.callTool(
    { name: "bash", arguments: { command: "echo one; sleep 0.3; echo two; sleep 1" } },
    undefined,
    { onprogress: () => (progress += 1) },
  );
  report.text = called.content[0].text;
  report.progress = progress;
  const controller = new AbortController();
  try {
    await client.callTool(
      { name: "bash", arguments: { command: "echo started; sleep 60" } },
      undefined,
      { signal: controller.signal, onprogress: () => controller.abort("test") },
    );
    report.cancelled = "answered";
  } catch (error) {
    report.cancelled = String(error);
  }
  const next = await client.callTool({ name: "bash", arguments: { command: "echo healthy" } });
  report.next = next.content[0].text;
  const big = await client.callTool({ name: "bash", arguments: { command: "seq 1 100000" } });
  report.contentTypes = big.content.map((content) => content.type);
  const uri = big.structuredContent.artifactUri;
  const read = await client.readResource({ uri });
  report.readLength = read.contents[0].text.length;
  const listed = await client.listResources();
  report.listed = listed.resources.some((resource) => resource.uri === uri);
  await client.ping();
  if (http) await transport.terminateSession();
  await client.close();
} catch (error) {
  report.raised = String(error && error.stack ? error.stack : error);
}
process.stdout.write(JSON.stringify(report) + "\n");
