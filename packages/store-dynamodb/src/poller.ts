/**
 * `waitForChange` for DynamoDB, which has no push channel: one poll loop per key and store,
 * shared by every waiter of that key in the process. Each look is one consistent `GetItem`; the
 * interval starts at `firstMs` and doubles up to `maxMs`. The loop wakes its waiters when the
 * record is finished, or differs (gone, claimed, taken over) from what its first look saw, and
 * stops when its last waiter leaves.
 */

/** What a look saw: `finished`, or a signature of the record (`''`: no live record). */
export type Look = { finished: true } | { finished: false; signature: string };

interface Loop {
  waiters: Set<() => void>;
  /** What the first look saw; undefined until it answered. */
  baseline?: string;
  timer?: ReturnType<typeof setTimeout>;
  intervalMs: number;
}

export class Poller {
  readonly #look: (key: string) => Promise<Look>;
  readonly #firstMs: number;
  readonly #maxMs: number;
  readonly #loops = new Map<string, Loop>();
  #closed = false;

  constructor(look: (key: string) => Promise<Look>, firstMs: number, maxMs: number) {
    this.#look = look;
    this.#firstMs = Math.min(firstMs, maxMs);
    this.#maxMs = maxMs;
  }

  wait(key: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (this.#closed || signal?.aborted === true || timeoutMs <= 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      let loop = this.#loops.get(key);
      if (loop === undefined) {
        loop = { waiters: new Set(), intervalMs: this.#firstMs };
        this.#loops.set(key, loop);
        this.#tick(key, loop);
      }
      const current = loop;
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        current.waiters.delete(done);
        if (current.waiters.size === 0) this.#stop(key, current);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal?.addEventListener('abort', done, { once: true });
      current.waiters.add(done);
    });
  }

  /** Wake every waiter and stop every loop; later waits resolve at once. */
  close(): void {
    this.#closed = true;
    for (const [key, loop] of this.#loops) this.#wake(key, loop);
  }

  #tick(key: string, loop: Loop): void {
    this.#look(key).then(
      (look) => {
        if (this.#loops.get(key) !== loop) return; // stopped meanwhile
        if (look.finished) return this.#wake(key, loop);
        if (loop.baseline === undefined) loop.baseline = look.signature;
        else if (look.signature !== loop.baseline) return this.#wake(key, loop);
        this.#schedule(key, loop);
      },
      () => {
        // A failed look (throttling, a network blip): look again later; the waiters' own
        // timeouts bound the wait.
        if (this.#loops.get(key) === loop) this.#schedule(key, loop);
      },
    );
  }

  #schedule(key: string, loop: Loop): void {
    loop.timer = setTimeout(() => this.#tick(key, loop), loop.intervalMs);
    loop.intervalMs = Math.min(loop.intervalMs * 2, this.#maxMs);
  }

  #wake(key: string, loop: Loop): void {
    this.#stop(key, loop);
    for (const done of [...loop.waiters]) done();
  }

  #stop(key: string, loop: Loop): void {
    clearTimeout(loop.timer);
    if (this.#loops.get(key) === loop) this.#loops.delete(key);
  }
}
