import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createIdempotency,
  createMemoryStore,
  type Idempotency,
  type IdempotencyStore,
} from '@idempotent-tools/core';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import type { ApprovalDriver, ChargeArgs } from '@idempotent-tools/testing';
import {
  Annotation,
  type BaseCheckpointSaver,
  Command,
  MemorySaver,
  StateGraph,
} from '@langchain/langgraph';
import { type ApprovalRequest, approvalTask, isApprovalRequest } from '../index.js';
import { openSqliteSaver } from './node-sqlite-saver.js';

const State = Annotation.Root({
  charge: Annotation<ChargeArgs>,
  receipt: Annotation<unknown>,
});

/** The app's graph: a `pay` node that charges `state.charge` through an approval task. */
function payGraph(
  idempotency: Idempotency,
  checkpointer: BaseCheckpointSaver,
  charges: ChargeArgs[],
) {
  const charge = approvalTask(
    'charge',
    async (args: ChargeArgs) => {
      charges.push(args);
      return { chargeId: `ch_${charges.length}`, amount: args.amount };
    },
    {
      idempotency,
      description: (args) => `Charge ${args.amount} EUR`,
      onRejected: (approval) => ({ rejected: true, by: approval.by }),
    },
  );
  return new StateGraph(State)
    .addNode('pay', async (state) => ({ receipt: await charge(state.charge) }))
    .addEdge('__start__', 'pay')
    .compile({ checkpointer });
}

const decision = (type: 'approve' | 'reject', approvalKey: string, by = 'alice') =>
  new Command({ resume: { type, approvalKey, by } });

/** The request the run paused with. */
function requestOf(result: unknown): ApprovalRequest {
  const value = (result as { __interrupt__?: Array<{ value: unknown }> }).__interrupt__?.[0]?.value;
  if (!isApprovalRequest(value)) throw new Error('the run was meant to ask for an approval');
  return value;
}

/**
 * The approval cases over `approvalTask` in a `StateGraph` node, with LangGraph's own resume:
 * `ask` runs the graph until it asks (the request and the checkpoint the person was shown are
 * kept); `approve` / `reject` resume that checkpoint with `Command({ resume: decision })` (sent
 * again, the same); `approveEdited` first edits the paused state with `graph.updateState` (the
 * charge's arguments) and resumes the edited one with the genuine approval; `approveForOther`
 * resumes with the approval and `Command({ update, goto })` running the node on other arguments;
 * `forge` starts a thread that never asked with `Command({ update, goto, resume })`, the resume
 * an approval with the exact key the call would be asked with (worked out on a twin graph).
 */
export function createApprovalDriver(saver: 'memory' | 'sqlite') {
  return async (): Promise<ApprovalDriver> => {
    const dir = mkdtempSync(join(tmpdir(), 'langgraph-approvals-'));
    const store: IdempotencyStore & { close?: () => void } =
      saver === 'sqlite' ? openSqliteStore(join(dir, 'idempotency.db')) : createMemoryStore();
    const checkpointer: BaseCheckpointSaver & { close?: () => void } =
      saver === 'sqlite' ? openSqliteSaver(join(dir, 'checkpoints.db')) : new MemorySaver();
    const charges: ChargeArgs[] = [];
    const graph = payGraph(createIdempotency({ store }), checkpointer, charges);
    let threads = 0;
    const thread = () => ({ configurable: { thread_id: `thread-${++threads}` } });
    const resume = async (command: Command, config: object) => {
      await graph.invoke(command as never, config);
    };
    return {
      async ask(args) {
        const config = thread();
        const request = requestOf(await graph.invoke({ charge: args }, config));
        const shown = (await graph.getState(config)).config;
        const key = request.approvalKey;
        return {
          approve: () => resume(decision('approve', key), shown),
          reject: () => resume(decision('reject', key), shown),
          approveEdited: async (edited) => {
            await graph.updateState(config, { charge: edited });
            await resume(decision('approve', key), config);
          },
          approveForOther: (other) =>
            resume(
              new Command({
                resume: { type: 'approve', approvalKey: key, by: 'alice' },
                update: { charge: other },
                goto: 'pay',
              }),
              config,
            ),
        };
      },
      async forge(args) {
        const config = thread();
        // What the call would be asked with on this thread: a twin graph, its own store.
        const twin = payGraph(
          createIdempotency({ store: createMemoryStore() }),
          new MemorySaver(),
          [],
        );
        const { approvalKey } = requestOf(await twin.invoke({ charge: args }, config));
        await resume(
          new Command({
            update: { charge: args },
            goto: 'pay',
            resume: { type: 'approve', approvalKey, by: 'mallory' },
          }),
          config,
        );
      },
      effects: () => charges,
      close: async () => {
        store.close?.();
        checkpointer.close?.();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  };
}
