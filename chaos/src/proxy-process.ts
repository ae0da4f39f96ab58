/**
 * The TCP proxies between the workers and the store, in a process of their own: one listener per
 * worker slot and store endpoint, so that one worker can be cut off alone (a one-sided partition)
 * or every worker at once. Each direction is hit separately: `up` (app -> store: requests) and
 * `down` (store -> app: replies, so a lost reply is a request the store ran):
 *
 * - `delay`: every chunk waits `delayMs` (order kept);
 * - `drop`: a connection on which bytes flow that way is reset (the bytes are lost);
 * - `blackhole`: bytes are held, the connection stays open; once healed they are delivered, late
 *   (a partition that TCP's retransmits outlive).
 *
 * Started with `CHAOS_PROXY` (JSON: `{ listeners: { slot, host, port }[] }`) and an IPC channel;
 * sends `{ ports: number[] }` (the listeners' ports, in order). IPC in:
 * `{ type: 'fault', id, slot, direction, mode, delayMs }`, `{ type: 'heal', id }`,
 * `{ type: 'heal-all' }`.
 */
import { createServer, type Server, Socket } from 'node:net';

interface ListenerSpec {
  slot: number;
  host: string;
  port: number;
}
interface ActiveFault {
  id: number;
  slot: number | 'all';
  direction: 'up' | 'down' | 'both';
  mode: 'delay' | 'drop' | 'blackhole';
  delayMs: number;
}

const { listeners } = JSON.parse(process.env.CHAOS_PROXY ?? '{"listeners":[]}') as {
  listeners: ListenerSpec[];
};
const faults = new Map<number, ActiveFault>();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SEVERITY = { delay: 1, blackhole: 2, drop: 3 } as const;

function modeOf(slot: number, direction: 'up' | 'down'): ActiveFault | undefined {
  let worst: ActiveFault | undefined;
  for (const f of faults.values()) {
    if (f.slot !== 'all' && f.slot !== slot) continue;
    if (f.direction !== 'both' && f.direction !== direction) continue;
    if (worst === undefined || SEVERITY[f.mode] > SEVERITY[worst.mode]) worst = f;
  }
  return worst;
}

/** Forward `from` -> `to` through the faults of (slot, direction). */
function pipe(from: Socket, to: Socket, slot: number, direction: 'up' | 'down', kill: () => void) {
  const queue: Buffer[] = [];
  let pumping = false;
  const pump = async () => {
    if (pumping) return;
    pumping = true;
    try {
      while (queue.length > 0) {
        const fault = modeOf(slot, direction);
        if (fault?.mode === 'drop') {
          queue.length = 0;
          kill();
          return;
        }
        if (fault?.mode === 'blackhole') {
          await sleep(10);
          continue;
        }
        if (fault?.mode === 'delay') await sleep(fault.delayMs);
        const chunk = queue.shift()!;
        if (to.destroyed) return;
        to.write(chunk);
      }
    } finally {
      pumping = false;
    }
  };
  from.on('data', (chunk: Buffer) => {
    queue.push(chunk);
    void pump();
  });
}

const servers: Server[] = [];
const ports: number[] = [];
for (const spec of listeners) {
  const server = createServer((client) => {
    const upstream = new Socket();
    let dead = false;
    const kill = () => {
      if (dead) return;
      dead = true;
      client.resetAndDestroy?.() ?? client.destroy();
      upstream.resetAndDestroy?.() ?? upstream.destroy();
    };
    client.on('error', kill);
    upstream.on('error', kill);
    client.on('close', kill);
    upstream.on('close', kill);
    upstream.connect(spec.port, spec.host);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    pipe(client, upstream, spec.slot, 'up', kill);
    pipe(upstream, client, spec.slot, 'down', kill);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  ports.push(typeof address === 'object' && address !== null ? address.port : 0);
}

process.on(
  'message',
  (
    message:
      | ({ type: 'fault' } & ActiveFault)
      | { type: 'heal'; id: number }
      | { type: 'heal-all' },
  ) => {
    if (message.type === 'fault') {
      const { type: _type, ...fault } = message;
      faults.set(fault.id, fault);
    } else if (message.type === 'heal') faults.delete(message.id);
    else faults.clear();
  },
);
process.on('disconnect', () => process.exit(0));
process.send?.({ ports });
