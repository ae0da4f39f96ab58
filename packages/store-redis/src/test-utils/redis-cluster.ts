/**
 * A real Redis Cluster for tests: `masters` `redis-server` processes with cluster mode on free
 * loopback ports, joined by `redis-cli --cluster create` (no replicas), no persistence. Test-only.
 *
 * ```ts
 * const cluster = await startRedisCluster();
 * const client = new Redis.Cluster(cluster.nodes);
 * // ...
 * await cluster.stop(); // kills every server and removes the temp dir, also after a failure
 * ```
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePorts, type RedisServer, startRedisServer, tempDir } from './redis-server.js';

const run = promisify(execFile);

export interface RedisClusterHandle {
  /** Startup nodes for `new Redis.Cluster(nodes)`. */
  readonly nodes: { host: string; port: number }[];
  readonly dir: string;
  /** Kill every server and remove the temp dir. Safe to call twice. */
  stop(): Promise<void>;
}

export async function startRedisCluster({ masters = 3 } = {}): Promise<RedisClusterHandle> {
  const temp = tempDir('cluster');
  const servers: RedisServer[] = [];
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await Promise.all(servers.map((server) => server.kill()));
    temp.remove();
  };
  try {
    const ports = await freePorts(masters, { bus: true });
    servers.push(
      ...(await Promise.all(
        ports.map((port) =>
          startRedisServer({
            port,
            dir: temp.dir,
            args: [
              '--cluster-enabled',
              'yes',
              '--cluster-config-file',
              `${temp.dir}/nodes-${port}.conf`,
            ],
          }),
        ),
      )),
    );
    await run(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...ports.map((port) => `127.0.0.1:${port}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { timeout: 30_000 },
    );
    await Promise.all(ports.map((port) => waitClusterOk(port)));
    return { nodes: ports.map((port) => ({ host: '127.0.0.1', port })), dir: temp.dir, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Wait until the node reports `cluster_state:ok`. */
async function waitClusterOk(port: number, timeoutMs = 120_000): Promise<void> {
  const client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const info = await client.cluster('INFO');
      if (info.includes('cluster_state:ok')) return;
      if (Date.now() > deadline) throw new Error(`node ${port}: cluster_state not ok: ${info}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    client.disconnect();
  }
}
