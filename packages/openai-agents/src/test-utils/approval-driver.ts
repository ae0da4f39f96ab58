/**
 * The approval cases (`runApprovalCases` of @idempotent-tools/testing) for the Agents SDK: the
 * model asks to charge an amount (`needsApproval`) through the real run loop and the real
 * `openai` client against the scripted server; the run stops; the saved `RunState` (as it is,
 * edited, or made up) is approved or rejected and resumed in another process
 * (`approval-child.ts`) on the same SQLite store.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createMemoryStore } from '@idempotent-tools/core';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import {
  type ApprovalDriver,
  type ChargeArgs,
  type PendingApproval,
  runChild,
} from '@idempotent-tools/testing';
import { startScriptedServer } from '@idempotent-tools/testing/openai';
import { run } from '@openai/agents';
import { createIdempotency } from '../index.js';
import { chargeAgent, chargeModel } from './app.js';

const child = fileURLToPath(new URL('./approval-child.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('../..', import.meta.url));

/** Run `approval-child.ts` with `env`; its exit code and output. */
export const resumeInChild = (env: Record<string, string>) =>
  runChild(child, { cwd: packageDir, env });

/** The arguments of a charge as they sit in a serialized state (a JSON string in JSON). */
const argsText = (args: ChargeArgs) => JSON.stringify(JSON.stringify(args)).slice(1, -1);

/** `state` with every `from` replaced; throws when there is none (the edit would be a no-op). */
function edit(state: string, from: string, to: string): string {
  if (!state.includes(from)) throw new Error(`the saved state holds no ${from}`);
  return state.replaceAll(from, to);
}

export interface AgentsApprovalDriver extends Required<ApprovalDriver> {
  ask(args: ChargeArgs): Promise<Required<PendingApproval>>;
  /** What the last resume printed (its final output, or the error it exited with). */
  lastOutput(): string;
}

export async function createAgentsApprovalDriver(): Promise<AgentsApprovalDriver> {
  const dir = mkdtempSync(join(tmpdir(), 'openai-approval-cases-'));
  const files = { APPROVAL_DB: join(dir, 'store.db'), APPROVAL_EFFECTS: join(dir, 'effects') };
  const server = await startScriptedServer({ respond: chargeModel });
  const store = openSqliteStore(files.APPROVAL_DB);
  const agent = chargeAgent(createIdempotency({ store }), server.baseURL, files.APPROVAL_EFFECTS);
  let conversations = 0;
  let resumes = 0;
  let output = '';

  /** Resume `state` in another process with the decision; rejects when the child fails. */
  const resume = async (state: string, decision: 'approve' | 'reject') => {
    const file = join(dir, `state-${++resumes}.json`);
    writeFileSync(file, state);
    const { code, out } = await resumeInChild({
      ...files,
      APPROVAL_STATE: file,
      APPROVAL_BASE_URL: server.baseURL,
      APPROVAL_AGENT: 'charge',
      APPROVAL_DECISION: decision,
    });
    output = out;
    if (code !== 0) throw new Error(`the resumed run failed (exit ${code}): ${out}`);
  };

  /** The model asks to charge `args` in a new conversation; the run stops for the approval. */
  const interrupt = async (target: typeof agent, args: ChargeArgs, conversationId: string) => {
    const stopped = await run(target, `Charge ${args.amount}, please.`, {
      context: { conversationId },
    });
    const [pending, ...more] = stopped.interruptions;
    if (pending === undefined || more.length > 0 || pending.name !== 'charge') {
      throw new Error('the run did not stop for one approval of charge');
    }
    const callId = (pending.rawItem as { callId?: string }).callId;
    if (callId === undefined) throw new Error('the approval item has no call id');
    return { saved: stopped.state.toString(), callId };
  };

  return {
    async ask(args) {
      const { saved, callId } = await interrupt(agent, args, `chat-${++conversations}`);
      return {
        approve: () => resume(saved, 'approve'),
        reject: () => resume(saved, 'reject'),
        // The saved state's pending call edited to other arguments.
        approveEdited: (other) => resume(edit(saved, argsText(args), argsText(other)), 'approve'),
        // The approval moved to a call the model never emitted: another call id, other arguments.
        approveForOther: (other) =>
          resume(
            edit(edit(saved, callId, 'call_notasked'), argsText(args), argsText(other)),
            'approve',
          ),
      };
    },
    async forge(args) {
      // A conversation where the model asked for nothing.
      const chat = `chat-${++conversations}`;
      await run(agent, 'Hello.', { context: { conversationId: chat } });
      // A state made up elsewhere (another store: this one never saw its call), with a made-up
      // call id and this conversation, and a turn id, so that nothing but the approval is off.
      const elsewhere = chargeAgent(
        createIdempotency({ store: createMemoryStore() }),
        server.baseURL,
        join(dir, 'elsewhere-effects'),
      );
      const template = await interrupt(elsewhere, { amount: 1 }, 'chat-elsewhere');
      const made = JSON.parse(
        edit(
          edit(template.saved, template.callId, 'call_madeup01'),
          argsText({ amount: 1 }),
          argsText(args),
        ),
      ) as { context: { context: Record<string, unknown> } };
      made.context.context = { conversationId: chat, turnId: `${chat}-forged-turn` };
      await resume(JSON.stringify(made), 'approve');
    },
    effects: () =>
      existsSync(files.APPROVAL_EFFECTS)
        ? readFileSync(files.APPROVAL_EFFECTS, 'utf8')
            .split('\n')
            .filter((line) => line !== '')
            .map((line) => JSON.parse(line) as ChargeArgs)
        : [],
    lastOutput: () => output,
    async close() {
      store.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
