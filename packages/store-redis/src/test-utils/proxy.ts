/**
 * A TCP proxy on 127.0.0.1 in front of a server, for tests of lost replies: it forwards both
 * ways until armed, then swallows the server's next reply (the command has run on the server)
 * and cuts the connection, or holds the reply back. Test-only: not part of the package build.
 */
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

export interface FaultProxy {
  readonly port: number;
  /** Replies swallowed so far (each one cut its connection). */
  readonly dropped: number;
  /**
   * Swallow the next data the server sends on any connection, then cut that connection (both
   * sides). `onDrop` runs once the reply was swallowed (the server has answered, so the command
   * ran), before the client sees the cut.
   */
  dropNextReply(onDrop?: () => void | Promise<void>): void;
  /** Hold back the server's next reply until `release()` (then it is forwarded as it came). */
  holdNextReply(): { release(): void; readonly held: Promise<void> };
  /** Cut every connection through the proxy now. */
  cutAll(): void;
  close(): Promise<void>;
}

export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  const pairs = new Set<[Socket, Socket]>();
  let drop: { onDrop?: (() => void | Promise<void>) | undefined } | undefined;
  let hold: { release: () => void; gate: Promise<void>; seen: () => void } | undefined;
  let dropped = 0;

  const server: Server = createServer((client) => {
    const upstream = tcpConnect(target.port, target.host);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const cut = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', cut);
    upstream.on('error', cut);
    client.on('close', cut);
    upstream.on('close', cut);
    client.on('data', (chunk) => upstream.write(chunk));
    // Replies go through one at a time, in order, even while one is held back.
    let queue = Promise.resolve();
    upstream.on('data', (chunk) => {
      if (drop !== undefined) {
        const armed = drop;
        drop = undefined;
        dropped++;
        upstream.pause();
        queue = queue.then(async () => {
          await armed.onDrop?.();
          cut();
        });
        return;
      }
      if (hold !== undefined) {
        const armed = hold;
        hold = undefined;
        armed.seen();
        queue = queue.then(async () => {
          await armed.gate;
          if (!client.destroyed) client.write(chunk);
        });
        return;
      }
      queue = queue.then(() => {
        if (!client.destroyed) client.write(chunk);
      });
    });
  });
  const cutAll = () => {
    for (const [client, upstream] of [...pairs]) {
      client.destroy();
      upstream.destroy();
    }
    pairs.clear();
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no port');

  return {
    port: address.port,
    get dropped() {
      return dropped;
    },
    dropNextReply(onDrop) {
      drop = { onDrop };
    },
    holdNextReply() {
      let release!: () => void;
      let seen!: () => void;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const held = new Promise<void>((resolve) => {
        seen = resolve;
      });
      hold = { release, gate, seen };
      return { release, held };
    },
    cutAll,
    async close() {
      cutAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
