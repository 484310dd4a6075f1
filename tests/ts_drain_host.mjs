// A host written for Qwen Code 0.24.4, on the official TypeScript ACP SDK: it spawns the
// agent command given after the working directory, answers the drain only under the
// bare name the original sends (the TypeScript SDK passes names through unchanged),
// allows every permission request, sends one prompt and prints one JSON line: the raw
// prompt response, the method of every extension request it received, and the agent
// message texts.  The SDK is loaded from ACP_TS_SDK (the path of its dist/acp.js).
// Usage: node ts_drain_host.mjs CWD AGENT_COMMAND...
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const acp = await import(pathToFileURL(process.env.ACP_TS_SDK).href);
const [cwd, ...agent] = process.argv.slice(2);
const child = spawn(agent[0], agent.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const seen = { extRequests: [], agentTexts: [] };

const connection = new acp.ClientSideConnection(
  () => ({
    async requestPermission(params) {
      const option = params.options.find((o) => o.kind === "allow_once");
      return { outcome: { outcome: "selected", optionId: option.optionId } };
    },
    async sessionUpdate(params) {
      const update = params.update;
      if (update.sessionUpdate === "agent_message_chunk" && update.content.type === "text") {
        seen.agentTexts.push(update.content.text);
      }
    },
    async extMethod(method, params) {
      seen.extRequests.push(method);
      if (method === "craft/drainMidTurnQueue") {
        return { messages: [], hasQueuedPrompt: false };
      }
      throw acp.RequestError.methodNotFound(method);
    },
  }),
  stream,
);

await connection.initialize({ protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
const session = await connection.newSession({ cwd, mcpServers: [] });
const response = await connection.prompt({
  sessionId: session.sessionId,
  prompt: [{ type: "text", text: "go" }],
});
process.stdout.write(JSON.stringify({ response, ...seen }) + "\n");
child.stdin.end();
child.on("exit", () => process.exit(0));
setTimeout(() => { child.kill(); process.exit(0); }, 10000).unref();
