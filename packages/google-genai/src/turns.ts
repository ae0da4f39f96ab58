/** The conversation of a Gemini request, as the turn derivation reads it. */
import type { Content, ContentListUnion, Part, PartListUnion } from '@google/genai';
import {
  type RequestIdentity,
  readTranscript,
  type TranscriptEntry,
} from '@idempotent-tools/core/adapter-kit';

/** Which conversation, and which turn of it, the function calls of one request belong to. */
export interface GeminiTurn extends RequestIdentity {
  /** The `contents` of the request (`models.generateContent` / `generateContentStream`). */
  contents?: ContentListUnion | undefined;
  /** A chat session (`ai.chats.create`): its curated history is the conversation. */
  chat?: { getHistory(curated?: boolean): Content[] } | undefined;
  /** With `chat`: the message being sent, for calls made while `sendMessage` is in flight (AFC). */
  message?: PartListUnion | undefined;
}

const isContent = (value: unknown): value is Content =>
  typeof value === 'object' && value !== null && Array.isArray((value as Content).parts);

/** Contents as the SDK reads them: a string or parts are one user content. */
function contentsOf(union: ContentListUnion | PartListUnion | undefined): Content[] {
  if (union === undefined || union === null) return [];
  const list: unknown[] = Array.isArray(union) ? union : [union];
  if (list.every(isContent)) return list as Content[];
  const parts = list.map((p): Part => (typeof p === 'string' ? { text: p } : (p as Part)));
  return [{ role: 'user', parts }];
}

/**
 * The transcript of a turn (undefined when it names no conversation content): the request's
 * `contents`, or a chat's curated history plus the message it is sending. User turns are `user`
 * contents with a part the user wrote (function responses answer the turn before); a `model`
 * content answers. `systemInstruction` is never part of it.
 */
export function transcriptOf(turn: GeminiTurn): TranscriptEntry[] | undefined {
  if (turn.contents === undefined && turn.chat === undefined) return undefined;
  const contents = [
    ...(turn.chat?.getHistory(true) ?? []),
    ...contentsOf(turn.contents),
    ...contentsOf(turn.message),
  ];
  return readTranscript(contents, {
    from: ({ role }) => (role === 'model' ? 'model' : role === 'function' ? 'tool' : 'user'),
    content: (content) => content.parts ?? [],
    isToolResult: (part) => (part as Part).functionResponse !== undefined,
  });
}
