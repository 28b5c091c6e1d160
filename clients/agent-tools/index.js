// intentd-agent-tools: money-moving tools for AI agents, behind intentd.
//
//   import { guardTool, AnchorRefused } from 'intentd-agent-tools';
//   import { mcpToolHandler } from 'intentd-agent-tools/mcp';       // MCP servers
//   import { agentsTool } from 'intentd-agent-tools/agents';        // OpenAI Agents SDK
//
// docs/agents.md: when to use it, the anchor rule, the outcomes.
export { GuardedTool, guardTool } from './src/guard.js';
export { AnchorRefused } from './src/errors.js';
export { OUTCOMES, ToolOutcome } from './src/outcome.js';
export { frozenInput } from './src/frozen-input.js';
export { Retriable, Terminal } from 'intentd-client';
