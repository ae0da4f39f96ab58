/**
 * Every item type of the `openai` package's `ResponseInputItem` and of the Agents SDK's protocol,
 * placed on purpose: a type the package adds fails the typecheck here until it is placed (and
 * `itemSource`'s rules checked for it).
 */

import type { ResponseInputItem } from 'openai/resources/responses/responses';
import { expect, test } from 'vitest';
import { responsesItemSource as itemSource } from './responses-items.js';
import type { MessageSource } from './transcripts.js';

/** Item types of the Agents SDK's own protocol that the Responses API does not have. */
type AgentsItemType =
  | 'function_call_result'
  | 'computer_call_result'
  | 'hosted_tool_call'
  | 'unknown';

const ITEM_SOURCES: Record<
  Exclude<NonNullable<ResponseInputItem['type']>, 'message'> | AgentsItemType,
  MessageSource | undefined
> = {
  item_reference: undefined,
  reasoning: 'model',
  compaction: 'model',
  function_call: 'model',
  custom_tool_call: 'model',
  computer_call: 'model',
  file_search_call: 'model',
  web_search_call: 'model',
  code_interpreter_call: 'model',
  image_generation_call: 'model',
  local_shell_call: 'model',
  shell_call: 'model',
  apply_patch_call: 'model',
  tool_search_call: 'model',
  mcp_list_tools: 'model',
  mcp_approval_request: 'model',
  mcp_call: 'model',
  program: 'model',
  hosted_tool_call: 'model',
  function_call_output: 'tool',
  function_call_result: 'tool',
  custom_tool_call_output: 'tool',
  computer_call_output: 'tool',
  computer_call_result: 'tool',
  local_shell_call_output: 'tool',
  shell_call_output: 'tool',
  apply_patch_call_output: 'tool',
  tool_search_output: 'tool',
  program_output: 'tool',
  mcp_approval_response: 'tool',
  additional_tools: 'prompt',
  configuration_update: 'prompt',
  compaction_trigger: 'prompt',
  // The SDK's item for a provider item it does not know: it came out of the model's output.
  unknown: 'model',
};

test.each(Object.entries(ITEM_SOURCES))('an item of type %s is from %s', (type, from) => {
  expect(itemSource({ type })).toBe(from);
});
