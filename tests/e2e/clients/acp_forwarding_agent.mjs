// An ACP agent on the official TypeScript SDK, served by the forwarding editor of
// docs/background-jobs.md (imported from acp_editor.mjs, the page's block as
// written), whose terminal calls go to a real bashrpc.
//
// Usage: node acp_forwarding_agent.mjs
// Runs shell text sent with `args: null` (the SDK turns it into `[]`), a program
// with arguments, a kill, a release and a cancelled `terminal/wait_for_exit`.
// Prints one JSON object: each result, or the error it ended with.
import * as acp from "@agentclientprotocol/sdk";
import { editor } from "./acp_editor.mjs";

// Far above what a cancel takes: only a request nobody answers reaches it.
const HANG_MS = 30000;
const sessionId = "acp-sdk";
const report = { raised: null };
const client = acp.agent({ name: "agent" }).connect(editor).client;
const ids = (terminalId) => ({ sessionId, terminalId });

async function failure(promise) {
  const hang = new Promise((resolve) => setTimeout(() => resolve("pending"), HANG_MS));
  try {
    return (await Promise.race([promise, hang])) === "pending" ? "pending" : "answered";
  } catch (error) {
    return { code: error.code, message: error.message, data: error.data ?? null };
  }
}

async function run(command, args) {
  const { terminalId } = await client.request("terminal/create", { sessionId, command, args });
  const exit = await client.request("terminal/wait_for_exit", ids(terminalId));
  const { output } = await client.request("terminal/output", ids(terminalId));
  await client.request("terminal/release", ids(terminalId));
  return { exit, output };
}

try {
  report.text = await run("echo one two | tr a-z A-Z", null);
  report.program = await run("printf", ["%s|%s\\n", "a b", "$HOME"]);
  const killed = await client.createTerminal({ sessionId, command: "exec sleep 300" });
  await killed.kill();
  report.killed = await killed.waitForExit();
  await killed.release();
  report.released = await failure(killed.currentOutput());
  const { terminalId } = await client.request("terminal/create", {
    sessionId,
    command: "exec sleep 300",
  });
  const cancel = new AbortController();
  const waiting = client.request("terminal/wait_for_exit", ids(terminalId), {
    cancellationSignal: cancel.signal,
  });
  // Answered after bashrpc read the wait: the cancel finds it in flight.
  await client.request("terminal/output", ids(terminalId));
  cancel.abort();
  report.cancelled = await failure(waiting);
  report.runsOn = (await client.request("terminal/output", ids(terminalId))).exitStatus ?? null;
  await client.request("terminal/release", ids(terminalId));
} catch (error) {
  report.raised = String(error && error.stack ? error.stack : error);
}
process.stdout.write(JSON.stringify(report) + "\n");
// bashrpc reads the end of its stdin as this process goes, and exits.
process.exit(0);
