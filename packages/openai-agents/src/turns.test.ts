/**
 * The Responses / Agents SDK input reader: every item type of the `openai` package's
 * `ResponseInputItem` (and of the Agents SDK's protocol) is from the user, the model, a tool or
 * the app's prompt; anything from the model or a tool answers the turn before it, so the same
 * words after it are a new turn; an item reference hides what it names, so a turn is not derived
 * over one.
 */
import { createMemoryStore } from '@idempotent-tools/core';
import type { ResponseInputItem } from 'openai/resources/responses/responses';
import { describe, expect, test } from 'vitest';
import { createIdempotency } from './index.js';
import { itemSource, requestTurns, responsesTurn } from './turns.js';

const user = (text: string): ResponseInputItem => ({ role: 'user', content: text });

/** One item of each type, as an app sends it back in `input`, and who it is from. */
const items: Array<[string, ResponseInputItem | Record<string, unknown>, string | undefined]> = [
  ['a user message (EasyInputMessage)', user('hi'), 'user'],
  [
    "a user message, type: 'message', input_text parts",
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] },
    'user',
  ],
  ['a system message', { role: 'system', content: 'be brief' }, 'prompt'],
  [
    'a developer message item',
    { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'x' }] },
    'prompt',
  ],
  ['an assistant message', { role: 'assistant', content: 'ok' }, 'model'],
  [
    'an output message',
    {
      type: 'message',
      id: 'msg_1',
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: 'ok', annotations: [] }],
    },
    'model',
  ],
  ['reasoning', { type: 'reasoning', id: 'rs_1', summary: [] }, 'model'],
  ['a compaction', { type: 'compaction', encrypted_content: 'e' }, 'model'],
  [
    'a function call',
    { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
    'model',
  ],
  ['a function call output', { type: 'function_call_output', call_id: 'c1', output: 'x' }, 'tool'],
  [
    'a custom tool call',
    { type: 'custom_tool_call', call_id: 'c2', name: 'g', input: 'x' },
    'model',
  ],
  [
    'a custom tool call output',
    { type: 'custom_tool_call_output', call_id: 'c2', output: 'x' },
    'tool',
  ],
  [
    'a computer call',
    {
      type: 'computer_call',
      id: 'cu_1',
      call_id: 'c3',
      pending_safety_checks: [],
      status: 'completed',
    },
    'model',
  ],
  [
    'a computer call output',
    {
      type: 'computer_call_output',
      call_id: 'c3',
      output: { type: 'computer_screenshot', image_url: 'data:image/png;base64,AA==' },
    },
    'tool',
  ],
  [
    'a file search call',
    { type: 'file_search_call', id: 'fs_1', queries: [], status: 'completed' },
    'model',
  ],
  ['a web search call', { type: 'web_search_call', id: 'ws_1', status: 'completed' }, 'model'],
  ['a code interpreter call', { type: 'code_interpreter_call', id: 'ci_1' }, 'model'],
  [
    'an image generation call',
    { type: 'image_generation_call', id: 'ig_1', result: null, status: 'completed' },
    'model',
  ],
  ['a local shell call', { type: 'local_shell_call', id: 'ls_1', call_id: 'c4' }, 'model'],
  ['a local shell call output', { type: 'local_shell_call_output', id: 'c4', output: 'x' }, 'tool'],
  ['a shell call', { type: 'shell_call', call_id: 'c5' }, 'model'],
  ['a shell call output', { type: 'shell_call_output', call_id: 'c5', output: [] }, 'tool'],
  ['an apply patch call', { type: 'apply_patch_call', call_id: 'c6' }, 'model'],
  ['an apply patch call output', { type: 'apply_patch_call_output', call_id: 'c6' }, 'tool'],
  ['a tool search call', { type: 'tool_search_call', arguments: {} }, 'model'],
  ['a tool search output', { type: 'tool_search_output', tools: [] }, 'tool'],
  [
    'MCP tools listed',
    { type: 'mcp_list_tools', id: 'ml_1', server_label: 's', tools: [] },
    'model',
  ],
  [
    'an MCP approval request',
    { type: 'mcp_approval_request', id: 'mr_1', server_label: 's', name: 'n', arguments: '{}' },
    'model',
  ],
  [
    "the app's answer to an MCP approval request",
    { type: 'mcp_approval_response', approval_request_id: 'mr_1', approve: true },
    'tool',
  ],
  [
    'an MCP call',
    { type: 'mcp_call', id: 'mc_1', server_label: 's', name: 'n', arguments: '{}' },
    'model',
  ],
  [
    'a program',
    { type: 'program', id: 'p_1', call_id: 'c7', code: 'x', fingerprint: 'f' },
    'model',
  ],
  [
    'a program output',
    { type: 'program_output', id: 'po_1', call_id: 'c7', result: 'x', status: 'completed' },
    'tool',
  ],
  ['additional tools', { type: 'additional_tools', role: 'developer', tools: [] }, 'prompt'],
  ['a configuration update', { type: 'configuration_update' }, 'prompt'],
  ['a compaction trigger', { type: 'compaction_trigger' }, 'prompt'],
  ['an item reference', { type: 'item_reference', id: 'msg_1' }, undefined],
  ['an item reference without its type', { id: 'msg_1' }, undefined],
  // The Agents SDK's own items.
  [
    'SDK: a function call result',
    {
      type: 'function_call_result',
      callId: 'c1',
      name: 'f',
      status: 'completed',
      output: { type: 'text', text: 'x' },
    },
    'tool',
  ],
  [
    'SDK: a computer call result',
    { type: 'computer_call_result', callId: 'c3', output: {} },
    'tool',
  ],
  ['SDK: a hosted tool call', { type: 'hosted_tool_call', name: 'web_search' }, 'model'],
  ['SDK: an unknown provider item', { type: 'unknown', providerData: {} }, 'model'],
  ['a type this reader does not know (the safe side: an answer)', { type: 'future_call' }, 'model'],
];

describe('who each Responses / Agents SDK input item is from', () => {
  for (const [name, item, from] of items) {
    test(name, () => {
      expect(itemSource(item as Record<string, unknown>)).toBe(from);
    });
  }
});

describe('the turn of a request over those items', () => {
  const turns = requestTurns(createIdempotency({ store: createMemoryStore() }));
  const anchor = (input: unknown[]) => turns.anchor(responsesTurn(input, {}));
  const same = 'Yes, send it.';

  test('after anything from the model or a tool, the same words are a new turn', async () => {
    const once = await anchor([user(same)]);
    for (const [name, item, from] of items) {
      if (from !== 'model' && from !== 'tool') continue;
      const twice = await anchor([user(same), item, user(same)]);
      expect(twice, name).not.toEqual(once);
      expect('said' in twice, name).toBe(true);
    }
  });

  test('after only a prompt, the same words are the same turn sent again', async () => {
    const once = await anchor([user(same)]);
    for (const [name, item, from] of items) {
      if (from !== 'prompt') continue;
      expect(await anchor([user(same), item, user(same)]), name).toEqual(once);
    }
  });

  test('the same words as a string, input_text parts or a message item are one turn', async () => {
    const once = await anchor([user(same)]);
    expect(await anchor([{ role: 'user', content: [{ type: 'input_text', text: same }] }])).toEqual(
      once,
    );
    expect(
      await anchor([
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: same, prompt_cache_breakpoint: { mode: 'explicit' } },
          ],
        },
      ]),
    ).toEqual(once);
  });

  test('an item reference hides a user message or an answer: the turn is refused, naming turnId', async () => {
    for (const reference of [{ type: 'item_reference', id: 'msg_1' }, { id: 'msg_1' }]) {
      const refused = await anchor([user(same), reference, user(same)]);
      expect(refused).toEqual({ refuse: expect.stringContaining('Pass turnId') });
      expect(await anchor([reference, user(same)])).toEqual(refused);
    }
  });
});
