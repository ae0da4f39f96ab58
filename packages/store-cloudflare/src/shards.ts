/**
 * Which object holds a key: FNV-1a (32 bits) of the key's UTF-8 bytes, modulo the number of
 * shards. Stable across runtimes, releases and languages, so every Worker (and every version of
 * this package) sends a key to the same object: a key moved to another object would be a fresh
 * key there, and its call could run twice.
 */

const encoder = new TextEncoder();

/** FNV-1a, 32 bits, of `text` as UTF-8. */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of encoder.encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** The shard (0 to `shards - 1`) of `key`. */
export function shardOf(key: string, shards: number): number {
  return fnv1a(key) % shards;
}
