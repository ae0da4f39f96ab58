/**
 * How the Agents SDK's structured tool outputs (text, image, file parts) keep their shape when
 * marked.
 */
import { markContent, markOutput } from '@idempotent-tools/core/adapter-kit';

/**
 * Content parts (text, image, file) keep their shape when marked (`markContent`: the mark in the
 * last text part); any other value gets `markOutput`.
 */
export function markParts(
  value: unknown,
  replayed: boolean,
  markFresh: boolean,
  isPart: (value: unknown) => boolean,
): unknown {
  if (!replayed && !markFresh) return value;
  const parts =
    Array.isArray(value) && value.length > 0 && value.every(isPart)
      ? value
      : isPart(value)
        ? [value]
        : undefined;
  if (parts === undefined) return markOutput(value, replayed, markFresh);
  return markContent(parts as { type: string }[], replayed);
}
