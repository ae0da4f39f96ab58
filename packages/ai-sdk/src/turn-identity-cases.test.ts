import { runTurnIdentityCases } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import { chatRouteDriver, generateTextDriver } from './test-utils/drivers.js';
import { APIS } from './test-utils/scripted-model.js';

for (const api of APIS) {
  runTurnIdentityCases({
    name: `ai-sdk: useChat route (streamText) over @ai-sdk/openai ${api}`,
    describe,
    test,
    expect,
    createDriver: chatRouteDriver(api),
  });
  runTurnIdentityCases({
    name: `ai-sdk: generateText over @ai-sdk/openai ${api}`,
    describe,
    test,
    expect,
    createDriver: generateTextDriver(api),
  });
}
