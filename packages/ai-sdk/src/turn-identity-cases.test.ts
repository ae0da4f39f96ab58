import { runTurnIdentityCases } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import {
  CHAT_ROUTE_SUPPORTS,
  chatRouteDriver,
  GENERATE_TEXT_SUPPORTS,
  generateTextDriver,
} from './test-utils/drivers.js';
import { APIS } from './test-utils/scripted-model.js';

for (const api of APIS) {
  runTurnIdentityCases({
    name: `ai-sdk: useChat route (streamText) over @ai-sdk/openai ${api}`,
    describe,
    test,
    expect,
    createDriver: chatRouteDriver(api),
    supports: CHAT_ROUTE_SUPPORTS,
  });
  runTurnIdentityCases({
    name: `ai-sdk: generateText over @ai-sdk/openai ${api}`,
    describe,
    test,
    expect,
    createDriver: generateTextDriver(api),
    supports: GENERATE_TEXT_SUPPORTS,
  });
}
