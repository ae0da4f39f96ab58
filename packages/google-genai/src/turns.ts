/**
 * The conversation of a Gemini request as the turn derivation reads it: the request's `contents`
 * (any `ContentListUnion`), or a chat session's curated history plus the message it is sending.
 * User turns are `user` contents with a part the user wrote; function responses (sent as `user`
 * contents too) are left out, and a `model` content without function calls ends a turn.
 * `systemInstruction` lives in the config and is never part of it.
 */

import type { Content, ContentListUnion, Part, PartListUnion } from '@google/genai';
import type { TranscriptEntry } from '@idempotent-tools/core/adapter-kit';

/** Which conversation, and which turn of it, the function calls of one request belong to. */
export interface GeminiTurn {
  /** The `contents` of the request (`models.generateContent` / `generateContentStream`). */
  contents?: ContentListUnion | undefined;
  /** A chat session (`ai.chats.create`): its curated history is the conversation. */
  chat?: { getHistory(curated?: boolean): Content[] } | undefined;
  /** With `chat`: the message being sent, for calls made while `sendMessage` is in flight (AFC). */
  message?: PartListUnion | undefined;
  /** Your id of the user turn (e.g. of the user message). Wins over every other source. */
  turnId?: string | undefined;
  /** Your chat / session id: with it the turn is derived from the conversation's user messages. */
  conversationId?: string | undefined;
  /** Overrides the options' scope for these calls. */
  scope?: string | undefined;
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

/** The transcript of a turn, or undefined when it names no conversation content. */
export function transcriptOf(turn: GeminiTurn): (TranscriptEntry | undefined)[] | undefined {
  if (turn.contents === undefined && turn.chat === undefined) return undefined;
  const contents = [
    ...(turn.chat?.getHistory(true) ?? []),
    ...contentsOf(turn.contents),
    ...contentsOf(turn.message),
  ];
  return contents.map((content): TranscriptEntry | undefined => {
    const parts = content.parts ?? [];
    if (content.role === 'model') {
      return parts.some((p) => p.functionCall !== undefined) ? undefined : { role: 'answer' };
    }
    const said = parts.filter((p) => p.functionResponse === undefined);
    return said.length === 0 ? undefined : { role: 'user', content: said };
  });
}
