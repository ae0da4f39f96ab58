import { appendFileSync } from 'node:fs';

/**
 * The ticket system of the adapters' test apps: a side effect that counts, in memory
 * (`tickets`) and, when `effectsFile` is given, one line per ticket in that file (`countEffects`).
 */
export function ticketSystem(effectsFile?: string) {
  const tickets: Array<{ id: string; title: string }> = [];
  return {
    tickets,
    create<P extends string = 'normal'>(args: { title: string; priority?: P }) {
      const ticket = { id: `T-${tickets.length + 1}`, title: args.title };
      tickets.push(ticket);
      if (effectsFile !== undefined) appendFileSync(effectsFile, `${JSON.stringify(ticket)}\n`);
      return { ticket: ticket.id, title: ticket.title, priority: args.priority ?? 'normal' };
    },
  };
}

export type TicketSystem = ReturnType<typeof ticketSystem>;

/** The app's own retry: run the turn again from the saved history when it fails. */
export async function withRetries<T>(attempts: number, fn: () => Promise<T>): Promise<T> {
  let last: unknown;
  for (let i = 0; i < attempts; i++) {
    try {
      return await fn();
    } catch (error) {
      last = error;
    }
  }
  throw last;
}

/**
 * The crash point of a crash child of the ticket apps (`runChild`): `onEvent` for the executor
 * (SIGKILLs the process once `toolName`'s outcome is stored, `mode: 'after-persist'`), and
 * `system`, the ticket vendor on `effectsFile` that SIGKILLs the process right after the effect
 * (`mode: 'after-effect'`); `afterEffect` is that kill for a tool that calls the vendor itself.
 */
export function ticketCrash(options: {
  mode: string | undefined;
  effectsFile: string | undefined;
  toolName?: string;
}) {
  const die = () => process.kill(process.pid, 'SIGKILL');
  const toolName = options.toolName ?? 'create_ticket';
  const afterEffect = () => {
    if (options.mode === 'after-effect') die();
  };
  const inner = ticketSystem(options.effectsFile);
  return {
    onEvent: (event: { toolName: string; outcome: string }) => {
      if (options.mode === 'after-persist' && event.toolName === toolName) {
        if (event.outcome === 'executed') die();
      }
    },
    afterEffect,
    system: {
      ...inner,
      create<P extends string = 'normal'>(args: { title: string; priority?: P }) {
        const result = inner.create(args);
        afterEffect();
        return result;
      },
    },
  };
}

/**
 * The ticket vendor of a turn identity driver whose reply can be lost: after `loseNextReply()`,
 * the next ticket's creation calls `cut` once (the driver makes its scripted server cut the reply
 * of the request after the effect: a broken stream, a cut body). `tickets`: every ticket made.
 */
export function losingTicketSystem(cut: () => void) {
  const inner = ticketSystem();
  const armed = { lose: false };
  return {
    tickets: inner.tickets,
    system: {
      ...inner,
      create<P extends string = 'normal'>(args: { title: string; priority?: P }) {
        const out = inner.create(args);
        if (armed.lose) {
          armed.lose = false;
          cut();
        }
        return out;
      },
    } satisfies TicketSystem,
    loseNextReply: () => {
      armed.lose = true;
    },
  };
}

/**
 * The app's own retry of a turn in a turn identity driver: `run` up to three times, a failure
 * that `isFinal` picks (the developer's error) thrown at once. `round` counts from 0.
 */
export async function retryTurn(
  run: (round: number) => Promise<void>,
  isFinal: (error: unknown) => boolean,
): Promise<void> {
  for (let round = 0; ; round++) {
    try {
      await run(round);
      return;
    } catch (error) {
      if (isFinal(error) || round >= 2) throw error;
    }
  }
}
