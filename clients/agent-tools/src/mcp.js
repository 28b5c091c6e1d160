// The Model Context Protocol adapter: a guarded tool as an McpServer tool
// callback.
//
//   server.registerTool('create_pix_charge', { description, inputSchema },
//     mcpToolHandler(guarded));
//
// MCP has no idempotency of its own for tools/call: clients send a call
// twice, retry after a timeout, or restart the server and call again. The
// callback answers every outcome as a CallToolResult, an error outcome with
// isError (the model sees the text and the code), never as a thrown error.
// The anchor function receives the request's `extra` as its context:
// `extra.authInfo` (the token the server verified, where the transport
// authenticates: the tenant comes from there, not from the arguments),
// `extra.sessionId`, `extra.signal`.

import { ToolOutcome } from './outcome.js';

/** The CallToolResult of an outcome: the model's text, and the same facts
 *  as structuredContent for programs. */
export function toCallToolResult(outcome) {
  return {
    content: [{ type: 'text', text: outcome.text }],
    structuredContent: outcome.toJSON(),
    isError: outcome.isError,
  };
}

/** A tool callback for McpServer.registerTool / server.tool, for a tool
 *  registered with an inputSchema (the SDK then calls it with (args, extra)). */
export function mcpToolHandler(guarded) {
  return async (args, extra) => {
    try {
      return toCallToolResult(await guarded.run(args, extra));
    } catch (err) { // run() answers outcomes; this only keeps a bug from crashing the server
      return toCallToolResult(new ToolOutcome({ outcome: 'error', actionType: guarded.actionType,
        error: { code: 'tool_error', message: String((err && err.message) ?? err) } }));
    }
  };
}
