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
