import { convertArrayToReadableStream, MockLanguageModelV4 } from 'ai/test';

type GenerateResult = Awaited<ReturnType<MockLanguageModelV4['doGenerate']>>;
type StreamPart =
  Awaited<ReturnType<MockLanguageModelV4['doStream']>>['stream'] extends ReadableStream<infer P>
    ? P
    : never;
export type CallOptions = MockLanguageModelV4['doGenerateCalls'][number];

/** One model response: tool calls (run in parallel within the step), or a final text. */
export type ScriptStep = { calls: Array<{ tool: string; input: unknown }> } | { text: string };

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

let callIds = 0;

function contentOf(step: ScriptStep): GenerateResult['content'] {
  if ('text' in step) return [{ type: 'text', text: step.text }];
  // A new provider tool-call id every time, as on a real retry.
  return step.calls.map((call) => ({
    type: 'tool-call' as const,
    toolCallId: `call_${++callIds}`,
    toolName: call.tool,
    input: JSON.stringify(call.input),
  }));
}

/**
 * The AI SDK's own MockLanguageModelV4, answering each model call with the next scripted step
 * (generate or stream); after the script, a final text.
 */
export function scriptedModel(steps: ScriptStep[]): MockLanguageModelV4 {
  let next = 0;
  const take = (): ScriptStep => steps[next++] ?? { text: 'done' };
  const finishReason = (step: ScriptStep) =>
    ({ unified: 'text' in step ? 'stop' : 'tool-calls', raw: undefined }) as const;
  return new MockLanguageModelV4({
    doGenerate: async () => {
      const step = take();
      return { content: contentOf(step), finishReason: finishReason(step), usage, warnings: [] };
    },
    doStream: async () => {
      const step = take();
      const parts: StreamPart[] = [{ type: 'stream-start', warnings: [] }];
      for (const part of contentOf(step)) {
        if (part.type === 'text') {
          parts.push(
            { type: 'text-start', id: 't' },
            { type: 'text-delta', id: 't', delta: part.text },
            { type: 'text-end', id: 't' },
          );
        } else {
          parts.push(part as StreamPart);
        }
      }
      parts.push({ type: 'finish', finishReason: finishReason(step), usage });
      return { stream: convertArrayToReadableStream(parts) };
    },
  });
}

/** The tool results the model was shown in one call's prompt, in order. */
export function toolResultsSeen(
  call: CallOptions | undefined,
): Array<{ type: string; value?: unknown }> {
  const seen: Array<{ type: string; value?: unknown }> = [];
  for (const message of call?.prompt ?? []) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type === 'tool-result') seen.push(part.output as { type: string; value?: unknown });
    }
  }
  return seen;
}

/** Every model call of a generate or stream run. */
export function modelCalls(model: MockLanguageModelV4): CallOptions[] {
  return [...model.doGenerateCalls, ...model.doStreamCalls];
}
