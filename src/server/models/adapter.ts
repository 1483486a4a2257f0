/**
 * The one place that talks to the AI SDK: one model call (a step) streamed
 * as our own events, and embeddings. Everything above speaks our types, so
 * the SDK can be replaced here alone. The SDK and its providers are imported
 * on the first call: starting the daemon never pays for them.
 */
import type { ProviderKind } from '../../shared/config/schema.ts';

export interface ToolCallRecord {
  id: string;
  name: string;
  args: unknown;
}

/** A conversation as the gateway keeps it. */
export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: ToolCallRecord[] }
  | { role: 'tool'; toolCallId: string; toolName: string; content: unknown; isError?: boolean };

export interface ToolSpec {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

export interface Usage {
  /** Tokens read and written as the provider counted them; undefined when it did not say (never guessed as 0). */
  inputTokens?: number;
  outputTokens?: number;
}

export interface StepRequest {
  system?: string;
  messages: ChatMessage[];
  tools?: ToolSpec[];
  toolChoice?: ToolChoice;
  temperature?: number;
  maxOutputTokens?: number;
  signal: AbortSignal;
}

export type StepEvent =
  | { type: 'text'; text: string }
  | { type: 'tool-call'; call: ToolCallRecord }
  | { type: 'finish'; finishReason: string; usage: Usage };

/** How to reach one model of one provider. */
export interface ModelConnection {
  kind: ProviderKind;
  baseUrl?: string;
  apiKey?: string;
  headers?: Record<string, string>;
  model: string;
  /** The fetch the provider uses (the caller's, which watches the bytes for activity). */
  fetch: typeof globalThis.fetch;
}

/** Provider APIs accept tool names of letters, digits, _ and -; ours have dots. A per-call map turns them back. */
function toolNames(tools: readonly ToolSpec[]): { wire: Map<string, string>; back: Map<string, string> } {
  const wire = new Map<string, string>();
  const back = new Map<string, string>();
  for (const tool of tools) {
    let name = tool.name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 60);
    for (let n = 2; back.has(name); n++) name = `${name.slice(0, 56)}_${n}`;
    wire.set(tool.name, name);
    back.set(name, tool.name);
  }
  return { wire, back };
}

type Sdk = typeof import('ai');
let sdk: Promise<Sdk> | undefined;
const loadSdk = () => (sdk ??= import('ai'));

async function languageModel(connection: ModelConnection) {
  const headers = connection.headers ?? {};
  if (connection.kind === 'anthropic') {
    const { createAnthropic } = await import('@ai-sdk/anthropic');
    return createAnthropic({ ...(connection.baseUrl ? { baseURL: connection.baseUrl } : {}), apiKey: connection.apiKey ?? '', headers, fetch: connection.fetch })(connection.model);
  }
  const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible');
  if (!connection.baseUrl) throw new Error('the provider has no baseUrl');
  return createOpenAICompatible({
    name: 'gateway', baseURL: connection.baseUrl, headers, fetch: connection.fetch, includeUsage: true,
    ...(connection.apiKey ? { apiKey: connection.apiKey } : {}),
  }).chatModel(connection.model);
}

function toModelMessages(messages: readonly ChatMessage[], wire: Map<string, string>) {
  const name = (tool: string) => wire.get(tool) ?? tool.replace(/[^A-Za-z0-9_-]/g, '_');
  return messages.map((message) => {
    switch (message.role) {
      case 'system':
      case 'user':
        return { role: message.role, content: message.content };
      case 'assistant':
        return {
          role: 'assistant' as const,
          content: [
            ...(message.content ? [{ type: 'text' as const, text: message.content }] : []),
            ...(message.toolCalls ?? []).map((call) => ({ type: 'tool-call' as const, toolCallId: call.id, toolName: name(call.name), input: call.args })),
          ],
        };
      case 'tool':
        return {
          role: 'tool' as const,
          content: [{
            type: 'tool-result' as const, toolCallId: message.toolCallId, toolName: name(message.toolName),
            output: message.isError
              ? { type: 'error-text' as const, value: typeof message.content === 'string' ? message.content : JSON.stringify(message.content) }
              : { type: 'json' as const, value: (message.content ?? null) as never },
          }],
        };
    }
  });
}

/** One model call, streamed: text deltas, the tool calls the model made, then how it finished and what it used. */
export async function* streamStep(connection: ModelConnection, request: StepRequest): AsyncGenerator<StepEvent> {
  const { streamText, tool, jsonSchema } = await loadSdk();
  const { wire, back } = toolNames(request.tools ?? []);
  const tools = Object.fromEntries((request.tools ?? []).map((spec) => [wire.get(spec.name)!, tool({
    description: spec.description, inputSchema: jsonSchema(spec.inputSchema as never),
  })]));
  const choice = request.toolChoice;
  const result = streamText({
    model: await languageModel(connection),
    ...(request.system ? { system: request.system } : {}),
    messages: toModelMessages(request.messages, wire) as never,
    ...(Object.keys(tools).length > 0 ? { tools } : {}),
    ...(choice && Object.keys(tools).length > 0
      ? { toolChoice: typeof choice === 'object' ? { type: 'tool' as const, toolName: wire.get(choice.name) ?? choice.name } : choice }
      : {}),
    ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
    ...(request.maxOutputTokens === undefined ? {} : { maxOutputTokens: request.maxOutputTokens }),
    abortSignal: request.signal,
    // Retries, fallbacks and timeouts are the caller's: it knows whether output has reached anyone yet.
    maxRetries: 0,
    // Errors come back as parts of the stream and are thrown from here; the SDK must not print them itself.
    onError: () => undefined,
  });
  for await (const part of result.stream) {
    switch (part.type) {
      case 'text-delta':
        if (part.text) yield { type: 'text', text: part.text };
        break;
      case 'tool-call':
        yield { type: 'tool-call', call: { id: part.toolCallId, name: back.get(part.toolName) ?? part.toolName, args: part.input } };
        break;
      case 'finish':
        yield { type: 'finish', finishReason: part.finishReason, usage: { inputTokens: part.totalUsage.inputTokens, outputTokens: part.totalUsage.outputTokens } };
        break;
      case 'error':
        throw part.error;
      case 'abort':
        throw request.signal.reason ?? new Error('aborted');
      default:
        break;
    }
  }
}

/** Embeddings of several texts with one model; usage as the provider counted it. */
export async function embed(connection: ModelConnection, values: string[], signal: AbortSignal): Promise<{ embeddings: number[][]; tokens?: number }> {
  if (connection.kind !== 'openai-compatible' || !connection.baseUrl) throw new Error('this provider offers no embeddings');
  const [{ embedMany }, { createOpenAICompatible }] = await Promise.all([loadSdk(), import('@ai-sdk/openai-compatible')]);
  const provider = createOpenAICompatible({
    name: 'gateway', baseURL: connection.baseUrl, headers: connection.headers ?? {}, fetch: connection.fetch,
    ...(connection.apiKey ? { apiKey: connection.apiKey } : {}),
  });
  const result = await embedMany({ model: provider.embeddingModel(connection.model), values, abortSignal: signal, maxRetries: 0 });
  return { embeddings: result.embeddings, tokens: result.usage?.tokens };
}

/** What an upstream error says of itself: its HTTP status and Retry-After, when it is an API call error. */
export function upstreamFacts(error: unknown): { status?: number; retryAfterMs?: number; message: string } {
  const found = error as { statusCode?: number; responseHeaders?: Record<string, string>; message?: string; name?: string; cause?: unknown };
  const headers = found?.responseHeaders ?? {};
  let retryAfterMs: number | undefined;
  const ms = Number(headers['retry-after-ms']);
  if (Number.isFinite(ms) && ms >= 0) retryAfterMs = ms;
  else if (headers['retry-after'] !== undefined) {
    const seconds = Number(headers['retry-after']);
    retryAfterMs = Number.isFinite(seconds) ? seconds * 1000 : Math.max(0, Date.parse(headers['retry-after']) - Date.now());
  }
  const cause = found?.cause as { code?: string; message?: string } | undefined;
  const message = String(found?.message ?? error).slice(0, 500) + (cause?.code ? ` (${cause.code})` : '');
  return { status: typeof found?.statusCode === 'number' ? found.statusCode : undefined, retryAfterMs, message };
}
