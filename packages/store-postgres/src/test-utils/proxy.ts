/**
 * A TCP proxy on 127.0.0.1 in front of PostgreSQL, for tests of replies lost after the commit:
 * it forwards both ways and reads the server's messages (type byte + int32 length); once armed
 * it swallows the server's messages up to and including the next `ReadyForQuery` (`Z`: the
 * statement has run and its implicit transaction committed) and cuts that connection. Test-only:
 * not part of the package build.
 */
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

export interface CommitProxy {
  readonly port: number;
  /** Replies swallowed so far (each one cut its connection). */
  readonly dropped: number;
  /**
   * Swallow the next complete reply (through `ReadyForQuery`) on any connection, then cut it;
   * with `outageMs`, the database then looks down for that long (every connection cut, new ones
   * refused).
   */
  dropNextReply(options?: { outageMs?: number }): void;
  close(): Promise<void>;
}

export async function startCommitProxy(target: {
  host: string;
  port: number;
}): Promise<CommitProxy> {
  const pairs = new Set<[Socket, Socket]>();
  let armed = false;
  let dropped = 0;
  let outageAfterDrop = 0;
  let refusingUntil = 0;
  const outage = (ms: number) => {
    refusingUntil = Date.now() + ms;
    for (const [client, upstream] of [...pairs]) {
      client.destroy();
      upstream.destroy();
    }
    pairs.clear();
  };

  const server: Server = createServer((client) => {
    if (Date.now() < refusingUntil) {
      client.destroy();
      return;
    }
    const upstream = tcpConnect(target.port, target.host);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const cut = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const socket of pair) {
      socket.on('error', cut);
      socket.on('close', cut);
    }
    client.on('data', (chunk) => upstream.write(chunk));
    /** Bytes of the server stream not yet forwarded as whole messages. */
    let pending = Buffer.alloc(0);
    /** This connection is swallowing a reply. */
    let swallowing = false;
    upstream.on('data', (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      let forward = 0;
      let offset = 0;
      while (pending.length - offset >= 5) {
        const length = pending.readInt32BE(offset + 1);
        if (pending.length - offset < 1 + length) break;
        const type = String.fromCharCode(pending[offset]!);
        if (!swallowing && armed) {
          armed = false;
          swallowing = true;
          client.write(pending.subarray(0, forward));
        }
        offset += 1 + length;
        if (swallowing) {
          if (type === 'Z') {
            dropped++;
            cut();
            if (outageAfterDrop > 0) outage(outageAfterDrop);
            return;
          }
        } else {
          forward = offset;
        }
      }
      if (!swallowing) {
        client.write(pending.subarray(0, forward));
        pending = pending.subarray(forward);
      } else {
        pending = pending.subarray(offset);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no port');
  return {
    port: address.port,
    get dropped() {
      return dropped;
    },
    dropNextReply(options = {}) {
      armed = true;
      outageAfterDrop = options.outageMs ?? 0;
    },
    async close() {
      for (const [client, upstream] of [...pairs]) {
        client.destroy();
        upstream.destroy();
      }
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
