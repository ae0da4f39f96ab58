/**
 * A local Upstash REST endpoint in front of a real Redis, for tests and benchmarks only (it is
 * not Upstash, and not for production): it speaks the REST protocol Upstash documents
 * (https://upstash.com/docs/redis/features/restapi), so the real `@upstash/redis` client runs
 * against a real Redis here, offline:
 * - `POST /` with a command as a JSON array (`["EVALSHA", sha, 1, key, ...]`): `{ result }`, or
 *   `{ error }` with status 400 for a Redis error;
 * - `POST /pipeline` with an array of commands: an array of `{ result }` / `{ error }`, one per
 *   command, in order; `POST /multi-exec`: the same, inside `MULTI` / `EXEC`;
 * - `Authorization: Bearer <token>`: 401 `{ error: 'Unauthorized' }` without the token;
 * - `Upstash-Encoding: base64` (what the client sends by default): every string of a result is
 *   base64, integers stay numbers, nil is `null`, arrays nest.
 * Commands go to Redis through `send` (e.g. ioredis' `redis.call(name, ...args)`), so this
 * package needs no Redis client. Faults (`drop`, `timeout`, an HTTP status) work as on the
 * other scripted servers.
 */
import { type HttpFault, type ScriptedHttpServer, startScriptedHttp } from './http.js';

export interface UpstashBridgeOptions {
  /** Send one command to Redis; its reply as the client returns it (strings, numbers, arrays). */
  send(command: string, args: string[]): Promise<unknown>;
  /** Run commands in one `MULTI` / `EXEC`: each command's error or reply. */
  transaction?(commands: string[][]): Promise<Array<[Error | null, unknown]>>;
  /** The token clients must send. @default 'test-token' */
  token?: string;
  /** Faults for the first requests, in arrival order. */
  faults?: Array<HttpFault | undefined>;
}

export interface UpstashBridge extends ScriptedHttpServer<HttpFault> {
  /** The REST url to give the client (`new Redis({ url, token })`). */
  url: string;
  token: string;
  /** Redis commands run, by lowercase name (a pipeline counts each of its commands). */
  commands: Map<string, number>;
}

const encode = (value: unknown, base64: boolean): unknown => {
  if (typeof value === 'string') return base64 ? Buffer.from(value).toString('base64') : value;
  if (Buffer.isBuffer(value)) return value.toString(base64 ? 'base64' : 'utf8');
  if (Array.isArray(value)) return value.map((v) => encode(v, base64));
  return value ?? null;
};

const isCommand = (value: unknown): value is unknown[] =>
  Array.isArray(value) && value.length > 0 && typeof value[0] === 'string';

/** Start the bridge; close it when done. */
export async function startUpstashBridge(options: UpstashBridgeOptions): Promise<UpstashBridge> {
  const token = options.token ?? 'test-token';
  const commands = new Map<string, number>();
  const count = (command: unknown[]) => {
    const name = String(command[0]).toLowerCase();
    commands.set(name, (commands.get(name) ?? 0) + 1);
  };
  const run = async (command: unknown[], base64: boolean) => {
    count(command);
    try {
      const [name, ...args] = command.map(String);
      return { result: encode(await options.send(name as string, args), base64) };
    } catch (error) {
      return { error: (error as Error).message };
    }
  };
  const server = await startScriptedHttp<HttpFault>({
    faults: options.faults,
    path: (url) => new URL(url, 'http://bridge').pathname,
    injected: (status) => ({ error: `injected HTTP ${status}` }),
    handle(request, reply) {
      const base64 = String(request.headers['upstash-encoding'] ?? '').toLowerCase() === 'base64';
      if (request.headers.authorization !== `Bearer ${token}`) {
        return reply.json(401, { error: 'Unauthorized' });
      }
      const body = request.body;
      void (async () => {
        if (request.path === '/') {
          if (!isCommand(body)) return reply.json(400, { error: 'ERR the body is not a command' });
          const answer = await run(body, base64);
          return reply.json('error' in answer ? 400 : 200, answer);
        }
        if (request.path === '/pipeline' || request.path === '/multi-exec') {
          if (!Array.isArray(body) || !body.every(isCommand)) {
            return reply.json(400, { error: 'ERR the body is not an array of commands' });
          }
          if (request.path === '/pipeline') {
            const answers = [];
            for (const command of body) answers.push(await run(command, base64));
            return reply.json(200, answers);
          }
          if (options.transaction === undefined) {
            return reply.json(400, { error: 'ERR this bridge was started without transactions' });
          }
          for (const command of body) count(command);
          const replies = await options.transaction(body.map((c) => c.map(String)));
          return reply.json(
            200,
            replies.map(([error, result]) =>
              error === null ? { result: encode(result, base64) } : { error: error.message },
            ),
          );
        }
        reply.json(404, { error: `ERR unknown path ${request.path}` });
      })().catch((error: unknown) => reply.json(500, { error: String(error) }));
    },
  });
  return { ...server, url: server.origin, token, commands };
}
