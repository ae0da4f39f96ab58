/**
 * What the user wrote in a message, as the turn derivation reads it (docs/design.md, "Turn
 * identity", content): the same words as a string, as text parts of any provider's shape, as a
 * provider's input items, with or without provider options or cache breakpoints, are one
 * content. Text counts by its characters, binary parts (images, files, audio) by their bytes, a
 * URL or a file id by itself; media types, file names, detail levels, part ids, provider options
 * and cache markers never count.
 *
 * One normaliser for every framework: adapters hand over the content of a user message as their
 * framework holds it (the AI SDK's parts, OpenAI's Chat parts and Responses items, Anthropic's
 * blocks, Gemini's parts, LangChain's content blocks, Mastra's parts) and never shape it.
 */
import { toBase64, utf8 } from '../runtime/index.js';

type Part = Record<string, unknown>;

/** A part of the normalised content: text as a string, or what a binary part holds. */
type Normal = string | { data: string } | { url: string } | { file: unknown } | Part;

/** Fields that never count: per-attempt metadata, provider options, cache breakpoints. */
const VOLATILE = new Set([
  'providerOptions',
  'providerMetadata',
  'providerData', // the Agents SDK's provider fields of a part
  'prompt_cache_breakpoint', // OpenAI Chat / Responses
  'experimental_providerMetadata',
  'cache_control',
  'cacheControl',
  'createdAt',
  'citations',
  'detail',
  'mediaType',
  'mimeType',
  'mime_type',
  'media_type',
  'filename',
  'name',
  'format',
]);

const isObject = (value: unknown): value is Part =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const base64OfText = (text: string) => toBase64(utf8(text));

function base64OfBytes(value: unknown): string | undefined {
  if (value instanceof ArrayBuffer) return toBase64(new Uint8Array(value));
  if (ArrayBuffer.isView(value)) {
    return toBase64(new Uint8Array(value.buffer, value.byteOffset, value.byteLength));
  }
  return undefined;
}

/** A `data:` URL's bytes as base64 (its own base64 as it is, else the decoded text's). */
function dataUrl(url: string): { data: string } | undefined {
  const match = /^data:([^,]*),(.*)$/s.exec(url);
  if (match === null) return undefined;
  const [, meta = '', payload = ''] = match;
  if (/;base64$/i.test(meta)) return { data: payload };
  try {
    return { data: base64OfText(decodeURIComponent(payload)) };
  } catch {
    return { data: base64OfText(payload) };
  }
}

/** A string that names a resource (`https://`, `gs://`, `file://`...), as opposed to base64. */
const SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i;

/** What a payload field holds: bytes, a URL, a file reference; undefined when not a payload. */
function payloadOf(value: unknown): Normal | undefined {
  if (value === undefined || value === null) return undefined;
  const bytes = base64OfBytes(value);
  if (bytes !== undefined) return { data: bytes };
  if (value instanceof URL) return dataUrl(value.href) ?? { url: value.href };
  if (typeof value === 'string') {
    if (value.startsWith('data:')) return dataUrl(value) ?? { data: value };
    return SCHEME.test(value) ? { url: value } : { data: value };
  }
  if (!isObject(value)) return undefined;
  // Tagged shapes: the AI SDK's FileData, Anthropic's sources.
  switch (value.type) {
    case 'data':
      return payloadOf(value.data);
    case 'base64':
      return payloadOf(value.data);
    case 'url':
      return payloadOf(value.url);
    case 'text':
      return typeof value.text === 'string'
        ? { data: base64OfText(value.text) }
        : typeof value.data === 'string'
          ? { data: base64OfText(value.data) }
          : undefined;
    case 'reference':
      return { file: strip(value.reference) };
    case 'file':
      return value.file_id === undefined ? undefined : { file: value.file_id };
    case 'content':
      return { data: JSON.stringify(userContent(value.content)) };
  }
  // Untagged holders: OpenAI's `{ url }`, `{ file_data | file_id }`, `{ data, format }`.
  return (
    payloadOf(value.url) ??
    payloadOf(value.file_data) ??
    payloadOf(value.data) ??
    (value.file_id === undefined ? undefined : { file: value.file_id })
  );
}

/** The fields a binary part keeps its payload in, by framework, in the order they are read. */
const PAYLOAD_FIELDS = [
  'image', // AI SDK ImagePart
  'data', // AI SDK FilePart, LangChain data blocks
  'inlineData', // Gemini
  'source', // Anthropic image / document
  'image_url', // OpenAI Chat, Responses input_image, LangChain
  'file', // OpenAI Chat file part
  'file_data', // Responses input_file
  'file_url', // Responses input_file
  'input_audio', // OpenAI audio
  'url', // LangChain url blocks
] as const;

/** A value without the fields that never count, at every depth (for parts of unknown shapes). */
function strip(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(strip);
  const bytes = base64OfBytes(value);
  if (bytes !== undefined) return bytes;
  if (value instanceof URL) return value.href;
  if (!isObject(value)) return value;
  const out: Part = {};
  for (const [field, inner] of Object.entries(value)) {
    if (!VOLATILE.has(field) && inner !== undefined) out[field] = strip(inner);
  }
  return out;
}

/** One part of a user message, normalised. */
function partOf(part: unknown): Normal {
  if (typeof part === 'string') return part;
  if (!isObject(part)) return strip(part) as Normal;
  const { type } = part;
  if (
    typeof part.text === 'string' &&
    (type === undefined || type === 'text' || type === 'input_text')
  ) {
    return part.text;
  }
  for (const field of PAYLOAD_FIELDS) {
    const payload = payloadOf(part[field]);
    if (payload !== undefined) return payload;
  }
  // Gemini's file by URI; a file by id (Responses, LangChain v1; LangChain's `source_type: 'id'`).
  const fileData = part.fileData;
  if (isObject(fileData) && typeof fileData.fileUri === 'string') return { url: fileData.fileUri };
  const file = part.file_id ?? part.fileId ?? (part.source_type === 'id' ? part.id : undefined);
  if (file !== undefined) return { file };
  const { id: _id, ...rest } = part; // a part's own id is per attempt
  return strip(rest) as Normal;
}

/**
 * What the user wrote, normalised: one text is its string; anything else a list of normal parts
 * (text as strings, binary parts as `{ data: base64 }`, `{ url }` or `{ file }`). Takes a
 * message's content as the framework holds it: a string, a list of parts, or a holder of parts
 * (`{ parts }`, Mastra's stored format).
 */
export function userContent(content: unknown): unknown {
  if (typeof content === 'string') return content;
  if (content === undefined || content === null) return '';
  const parts = Array.isArray(content)
    ? content
    : isObject(content) && Array.isArray(content.parts)
      ? content.parts
      : [content];
  const normal = parts.map(partOf);
  return normal.length === 1 && typeof normal[0] === 'string' ? normal[0] : normal;
}
