/**
 * A proxy on 127.0.0.1 in front of dynalite that adds what dynalite 4 leaves out of the wire
 * protocol: the `Item` of a `ConditionalCheckFailedException` when the request asked for it
 * (`ReturnValuesOnConditionCheckFailure: ALL_OLD`), as DynamoDB sends it. The proxy reads the
 * item from dynalite itself after the failed write, so the store's client sees one request.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export async function startAllOldProxy(
  target: string,
): Promise<{ endpoint: string; stop(): Promise<void> }> {
  const upstream = new URL(target);
  const forward = (headers: Record<string, string | string[] | undefined>, body: Buffer) =>
    new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>(
      (resolve, reject) => {
        const req = request(
          {
            host: upstream.hostname,
            port: upstream.port,
            method: 'POST',
            path: '/',
            headers: { ...headers, host: upstream.host, 'content-length': body.length },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 500,
                headers: res.headers,
                body: Buffer.concat(chunks),
              }),
            );
          },
        );
        req.on('error', reject);
        req.end(body);
      },
    );
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      try {
        const body = Buffer.concat(chunks);
        const reply = await forward(req.headers, body);
        let out = reply.body;
        const input = JSON.parse(body.toString('utf8') || '{}') as {
          TableName?: string;
          Key?: Record<string, unknown>;
          Item?: Record<string, unknown>;
          ReturnValuesOnConditionCheckFailure?: string;
        };
        if (
          reply.status === 400 &&
          out.includes('ConditionalCheckFailedException') &&
          input.ReturnValuesOnConditionCheckFailure === 'ALL_OLD'
        ) {
          const key = input.Key ?? { id: input.Item?.id };
          const got = await forward(
            {
              'content-type': 'application/x-amz-json-1.0',
              'x-amz-target': 'DynamoDB_20120810.GetItem',
              authorization: req.headers.authorization,
              'x-amz-date': req.headers['x-amz-date'],
            },
            Buffer.from(
              JSON.stringify({ TableName: input.TableName, Key: key, ConsistentRead: true }),
            ),
          );
          const item = (JSON.parse(got.body.toString('utf8')) as { Item?: unknown }).Item;
          const error = JSON.parse(out.toString('utf8')) as Record<string, unknown>;
          if (item !== undefined) error.Item = item;
          out = Buffer.from(JSON.stringify(error));
        }
        const headers = { ...reply.headers, 'content-length': String(out.length) };
        delete (headers as Record<string, unknown>)['x-amz-crc32'];
        res.writeHead(reply.status, headers as Record<string, string>);
        res.end(out);
      } catch (error) {
        res.writeHead(500);
        res.end(String(error));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
