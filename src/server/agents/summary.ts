/**
 * Long conversations: what a model reads of a session is bounded (the
 * agent's `history` messages and `contextTokens`); the messages that fall
 * out of that window are summarised, never dropped. The summary is a message
 * of the session (kind `summary`, saying which messages it replaces); the
 * originals stay in the store, and `sessions show` shows both. A run reads
 * the latest summary and the messages after it.
 */
import type { AgentSettings } from '../../shared/config/types.ts';
import type { CallMeta, ChatMessage, ModelCaller } from '../models/module.ts';
import type { SessionMessage } from '../sessions/module.ts';

export const SUMMARY_INSTRUCTIONS = 'You summarise a conversation so that it can go on without its earlier messages. '
  + 'Keep every fact, name, number, date, decision, preference, promise and open question; leave out greetings and small talk. '
  + 'Write plain prose in the language of the conversation, at most 300 words, and nothing but the summary.';

/** What a summary message's data says it replaces. */
export interface Summarised {
  /** The first and last message it covers (with what earlier summaries covered). */
  fromId: number;
  toId: number;
  count: number;
  /** Messages of a very long session, from before summaries, that were too many to read for it. */
  unread?: number;
}

/** A rough token count of a message (four characters a token), with what its tool calls and results carry. */
export function tokensOf(message: SessionMessage): number {
  const data = message.kind === 'tool_call' || message.kind === 'tool_result' ? JSON.stringify(message.data ?? {}).length : 0;
  return Math.ceil((message.text.length + data) / 4) + 4;
}

/**
 * Splits the messages after the latest summary into those the model reads
 * and those to summarise first. Within bounds (at most `history` messages and
 * `contextTokens` tokens), nothing is summarised. Past them, the model keeps
 * about half of each, so that the next summary comes only after as many
 * messages again; the turns this run answers are always kept.
 */
export function window(messages: readonly SessionMessage[], settings: Pick<AgentSettings, 'history' | 'contextTokens'>, keep: readonly number[]): { older: SessionMessage[]; kept: SessionMessage[] } {
  const budget = settings.contextTokens ?? Number.POSITIVE_INFINITY;
  const total = messages.reduce((sum, message) => sum + tokensOf(message), 0);
  if (messages.length - keep.length <= settings.history && total <= budget) return { older: [], kept: [...messages] };
  const countLimit = Math.floor(settings.history / 2);
  const tokenLimit = budget / 2;
  let count = 0;
  let tokens = 0;
  let start = messages.length;
  for (let index = messages.length - 1; index >= 0; index--) {
    const message = messages[index]!;
    if (keep.includes(message.id)) {
      start = index;
      continue;
    }
    if (count + 1 > countLimit || tokens + tokensOf(message) > tokenLimit) break;
    count++;
    tokens += tokensOf(message);
    start = index;
  }
  // A tool result stays with its call: the window never opens between them.
  while (start > 0 && start < messages.length && messages[start]!.kind === 'tool_result') start--;
  return { older: messages.slice(0, start), kept: messages.slice(start) };
}

/** The transcript a summary is made from: the earlier summary, then each message as a line. */
function transcript(previous: string | undefined, messages: readonly SessionMessage[], maxChars: number): string {
  const lines = messages.map((message) => {
    if (message.kind === 'tool_call') return `[${message.sender} called ${String(message.data?.name)} with ${JSON.stringify(message.data?.args ?? {}).slice(0, 300)}]`;
    if (message.kind === 'tool_result') return `[${String(message.data?.name)} answered ${JSON.stringify(message.data?.error ?? message.data?.result ?? null).slice(0, 300)}]`;
    if (message.kind === 'error') return `[the run ${String(message.data?.status ?? 'failed')}: ${message.text}]`;
    const who = message.role === 'assistant' || (message.role !== 'user' && message.direction === 'out') ? 'assistant' : (message.senderName ?? message.sender ?? 'user');
    return `${who}: ${message.text}`;
  });
  let text = lines.join('\n');
  // The most recent part of what is summarised matters most: an overlong transcript loses its beginning, said so.
  if (text.length > maxChars) text = `[the first part of these messages is too long to read; what follows is their end]\n${text.slice(text.length - maxChars)}`;
  return previous ? `Summary of the conversation before these messages:\n${previous}\n\nThe messages that followed:\n${text}` : text;
}

/** Summarises messages (with the previous summary) with the agent's own models; resolves with the text, the model and its usage. */
export async function summarise(caller: ModelCaller, models: readonly string[], previous: string | undefined, messages: readonly SessionMessage[],
  meta: CallMeta, signal: AbortSignal, contextTokens?: number): Promise<{ text: string; model: string | null; usage: { inputTokens?: number; outputTokens?: number } }> {
  const maxChars = Math.max(8_000, Math.min(200_000, (contextTokens ?? 24_000) * 2));
  const request: ChatMessage[] = [{ role: 'user', content: transcript(previous, messages, maxChars) }];
  let text = '';
  let model: string | null = null;
  let usage = {};
  for await (const event of caller.step(models, { system: SUMMARY_INSTRUCTIONS, messages: request, tools: [], toolChoice: 'none', maxOutputTokens: 600, signal }, meta)) {
    if (event.type === 'model') model = event.ref;
    else if (event.type === 'text') text += event.text;
    else if (event.type === 'finish') usage = event.usage;
  }
  return { text: text.trim(), model, usage };
}
