import { runTurnIdentityCases } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import { createAgentDriver, isRefusal, SHAPES } from './test-utils/driver.js';
import { TRANSPORTS } from './test-utils/openai.js';

for (const transport of TRANSPORTS) {
  runTurnIdentityCases({
    name: `langchain: createAgent + idempotentToolsMiddleware over ChatOpenAI (${transport === 'json' ? 'agent.invoke, JSON' : 'agent.stream, SSE'})`,
    describe,
    test,
    expect,
    createDriver: createAgentDriver(transport),
    isDeveloperError: isRefusal,
    supports: {
      shapes: SHAPES,
      providerOptions: true,
      wrapTwice: true,
      methods: ['sayRepeatingCall', 'sayAnsweredByTool'],
    },
  });
}
