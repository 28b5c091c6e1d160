// The OpenAI Agents SDK adapter: a guarded tool as a function tool.
//
//   const charge = agentsTool(guarded, { name: 'create_pix_charge',
//     description: '…', parameters: z.object({ … }) });
//   new Agent({ tools: [charge], … });
//
// Agent runs re-run tools: on a task retry, after a resumed checkpoint, or
// when the model asks again on a later turn under a new tool_call_id, so the
// call id cannot be the key. The model gets the outcome's text (replays say
// so, and say not to retry); an error outcome is text too, never a throw
// that would end the run. The anchor function receives the RunContext: its
// `context` is the local context given to run() (the authenticated tenant,
// database handles), which the model never sees.

import { tool } from '@openai/agents';

/**
 * @param {import('./guard.js').GuardedTool} guarded
 * @param {object} options tool() options: name, description, parameters
 *   (a zod object or JSON schema), strict…; execute is supplied here
 */
export function agentsTool(guarded, options) {
  if ('execute' in options) throw new TypeError('agentsTool: execute is the guarded call');
  return tool({
    ...options,
    async execute(input, runContext) {
      return (await guarded.run(input, runContext)).text;
    },
  });
}
