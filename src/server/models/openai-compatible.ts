/**
 * One streamed call of an OpenAI-compatible chat completions API, read by the
 * gateway itself: the request body built from our conversation, the answer's
 * server-sent events split and parsed once each, text deltas passed on as they
 * come, tool calls assembled from their deltas by index, and the finish reason
 * and usage as the provider reported them. It speaks the same wire format the
 * model SDK's OpenAI-compatible provider does, without its per-event schema
 * validation and stream stages, which cost more than the rest of a streamed
 * chunk's path through the gateway. Anthropic and embeddings stay with the SDK.
 */
import { randomUUID } from 'node:crypto';
import type { ChatMessage, ModelConnection, StepEvent, StepRequest, ToolCallRecord } from './types.ts';

/** An error the provider answered with: the status, headers and message the caller's retry rules read. */
export class ProviderCallError extends Error {
  readonly statusCode: number;
  readonly responseHeaders: Record<string, string>;

  constructor(message: string, statusCode: number, responseHeaders: Record<string, string>) {
    super(message);
    this.name = 'ProviderCallError';
    this.statusCode = statusCode;
    this.responseHeaders = responseHeaders;
  }
}

/** What the stream sent that is not a chunk the format allows. */
export class ProviderStreamError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProviderStreamError';
  }
}

const FINISH: Record<string, string> = { stop: 'stop', length: 'length', content_filter: 'content-filter', tool_calls: 'tool-calls', function_call: 'tool-calls' };

type WireContent = string | ({ type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } })[];

/** Our conversation in the chat completions wire format (tool names already as the provider sees them). */
export function wireMessages(system: string | undefined, messages: readonly ChatMessage[], name: (tool: string) => string): Record<string, unknown>[] {
  const wire: Record<string, unknown>[] = system ? [{ role: 'system', content: system }] : [];
  for (const message of messages) {
    switch (message.role) {
      case 'system':
        wire.push({ role: 'system', content: message.content });
        break;
      case 'user': {
        const content: WireContent = typeof message.content === 'string'
          ? message.content
          : message.content.map((part) => (part.type === 'text'
            ? { type: 'text' as const, text: part.text }
            : { type: 'image_url' as const, image_url: { url: `data:${part.mimeType};base64,${Buffer.from(part.data).toString('base64')}` } }));
        wire.push({ role: 'user', content: Array.isArray(content) && content.length === 1 && content[0]!.type === 'text' ? content[0]!.text : content });
        break;
      }
      case 'assistant': {
        const calls = message.toolCalls ?? [];
        wire.push({
          role: 'assistant',
          content: calls.length > 0 ? message.content || null : message.content,
          ...(calls.length > 0
            ? { tool_calls: calls.map((call) => ({ id: call.id, type: 'function', function: { name: name(call.name), arguments: typeof call.args === 'string' ? call.args : JSON.stringify(call.args ?? {}) } })) }
            : {}),
        });
        break;
      }
      case 'tool':
        wire.push({ role: 'tool', tool_call_id: message.toolCallId, content: typeof message.content === 'string' ? message.content : JSON.stringify(message.content ?? null) });
        break;
    }
  }
  return wire;
}

interface PendingCall {
  id?: string;
  name?: string;
  args: string;
}

interface WireChunk {
  choices?: { delta?: { content?: unknown; refusal?: unknown; tool_calls?: unknown }; finish_reason?: unknown }[];
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
  error?: { message?: unknown };
}

const count = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);

/** The text of a delta's content: a string, or (some servers) an array of text parts. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content) if (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') text += (part as { text: string }).text;
  return text;
}

/**
 * One model call, streamed. `wire` and `back` map our tool names to the
 * provider's and back; `parseArgs` turns a call's argument text into a value.
 */
export async function* streamChat(
  connection: ModelConnection,
  request: StepRequest,
  tools: { type: 'function'; function: { name: string; description: string; parameters: unknown } }[],
  toolChoice: unknown,
  names: { wire: (tool: string) => string; back: (wire: string) => string },
  parseArgs: (text: string) => unknown,
): AsyncGenerator<StepEvent> {
  const body = JSON.stringify({
    model: connection.model,
    messages: wireMessages(request.system, request.messages, names.wire),
    ...(tools.length > 0 ? { tools } : {}),
    ...(tools.length > 0 && toolChoice !== undefined ? { tool_choice: toolChoice } : {}),
    ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
    ...(request.maxOutputTokens === undefined ? {} : { max_tokens: request.maxOutputTokens }),
    stream: true,
    stream_options: { include_usage: true },
  });
  const headers: Record<string, string> = {
    ...(connection.apiKey ? { authorization: `Bearer ${connection.apiKey}` } : {}),
    ...connection.headers,
    'content-type': 'application/json',
    accept: 'text/event-stream',
  };
  const url = `${connection.baseUrl!.replace(/\/+$/, '')}/chat/completions`;
  const response = await connection.fetch(url, { method: 'POST', headers, body, signal: request.signal });
  if (!response.ok) throw await failure(response);
  if (!response.body) throw new ProviderStreamError('the provider answered without a body');

  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const calls = new Map<number, PendingCall>();
  let finish: string | undefined;
  let inputTokens: number | undefined;
  let outputTokens: number | undefined;
  let buffer = '';
  let data = '';
  let ended = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        buffer += decoder.decode();
        // A last event without its blank line still counts.
        if (buffer.length > 0) buffer += '\n\n';
      } else {
        buffer += decoder.decode(value, { stream: true });
      }
      if (buffer.includes('\r')) buffer = buffer.replace(/\r\n?/g, '\n');
      let start = 0;
      let newline: number;
      while ((newline = buffer.indexOf('\n', start)) !== -1) {
        const line = buffer.slice(start, newline);
        start = newline + 1;
        if (line.length === 0) {
          // A blank line ends an event: its data lines, joined.
          if (data.length === 0) continue;
          const payload = data;
          data = '';
          // Read to the end as the SDK does (the connection goes back to the pool whole); nothing after [DONE] counts.
          if (ended) continue;
          if (payload === '[DONE]') {
            ended = true;
            continue;
          }
          let chunk: WireChunk;
          try {
            chunk = JSON.parse(payload) as WireChunk;
          } catch {
            throw new ProviderStreamError(`the provider sent an event that is not JSON: ${payload.slice(0, 120)}`);
          }
          if (chunk === null || typeof chunk !== 'object') throw new ProviderStreamError(`the provider sent an event that is not a chunk: ${payload.slice(0, 120)}`);
          if (chunk.error !== undefined) {
            throw new ProviderStreamError(typeof chunk.error?.message === 'string' ? chunk.error.message : `the provider reported an error: ${payload.slice(0, 200)}`);
          }
          if (chunk.usage) {
            inputTokens = count(chunk.usage.prompt_tokens) ?? inputTokens;
            outputTokens = count(chunk.usage.completion_tokens) ?? outputTokens;
          }
          const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
          if (!choice) continue;
          if (typeof choice.finish_reason === 'string') finish = choice.finish_reason;
          const delta = choice.delta;
          if (!delta) continue;
          const text = textOf(delta.content) + (typeof delta.refusal === 'string' ? delta.refusal : '');
          if (text) yield { type: 'text', text };
          if (Array.isArray(delta.tool_calls)) {
            for (const part of delta.tool_calls as { index?: unknown; id?: unknown; function?: { name?: unknown; arguments?: unknown } }[]) {
              const index = typeof part?.index === 'number' ? part.index : calls.size;
              let call = calls.get(index);
              if (!call) calls.set(index, (call = { args: '' }));
              if (typeof part.id === 'string' && part.id) call.id ??= part.id;
              if (typeof part.function?.name === 'string' && part.function.name) call.name ??= part.function.name;
              if (typeof part.function?.arguments === 'string') call.args += part.function.arguments;
            }
          }
        } else if (line.startsWith('data:')) {
          const field = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
          data = data.length === 0 ? field : `${data}\n${field}`;
        }
        // Comments (":"), event names, ids and retry hints change nothing here.
      }
      buffer = buffer.slice(start);
      if (done) break;
    }
  } finally {
    // Left early (aborted, or an error thrown above): the rest of the answer is not wanted.
    await reader.cancel().catch(() => undefined);
  }
  if (request.signal.aborted) throw request.signal.reason;
  for (const [index, call] of [...calls].sort((a, b) => a[0] - b[0])) {
    if (!call.name) throw new ProviderStreamError(`the provider's tool call ${index} has no function name`);
    const record: ToolCallRecord = { id: call.id ?? `call_${randomUUID().replace(/-/g, '').slice(0, 24)}`, name: names.back(call.name), args: parseArgs(call.args) };
    yield { type: 'tool-call', call: record };
  }
  yield { type: 'finish', finishReason: finish === undefined ? (calls.size > 0 ? 'tool-calls' : 'other') : (FINISH[finish] ?? 'other'), usage: { inputTokens, outputTokens } };
}

/** The error a provider answered with: its own message when the body says one, else the status text. */
async function failure(response: Response): Promise<ProviderCallError> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  let text = '';
  try {
    text = (await response.text()).slice(0, 64 * 1024);
  } catch {
    // The body went away: the status says enough.
  }
  let message = response.statusText || `HTTP ${response.status}`;
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    if (parsed && typeof parsed === 'object') {
      if (typeof parsed.error === 'object' && typeof parsed.error?.message === 'string') message = parsed.error.message;
      else if (typeof parsed.error === 'string') message = parsed.error;
      else if (typeof parsed.message === 'string') message = parsed.message;
    }
  } catch {
    // Not JSON: the status text.
  }
  return new ProviderCallError(message, response.status, headers);
}
