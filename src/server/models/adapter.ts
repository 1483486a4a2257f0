/**
 * The one place that talks to model providers: one model call (a step)
 * streamed as our own events, and embeddings. Everything above speaks our
 * types. OpenAI-compatible chat streams are read by the gateway itself
 * (openai-compatible.ts); Anthropic and embeddings go through the AI SDK,
 * whose providers are imported on their first call: starting the daemon
 * never pays for them.
 */
import type { LanguageModelV4, LanguageModelV4Prompt } from '@ai-sdk/provider';
import { parseJsonWithin } from '../../shared/json.ts';
import { streamChat } from './openai-compatible.ts';
import type { ChatMessage, ModelConnection, StepEvent, StepRequest, ToolSpec } from './types.ts';

export type { ChatMessage, ModelConnection, StepEvent, StepRequest, ToolCallRecord, ToolChoice, ToolSpec, Usage, UserPart } from './types.ts';

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

/** Providers' models, made once per provider settings and key and kept (making one builds the SDK's schemas). */
const models = new Map<string, Promise<LanguageModelV4>>();

function languageModel(connection: ModelConnection): Promise<LanguageModelV4> {
  const key = JSON.stringify([connection.kind, connection.baseUrl, connection.apiKey, connection.headers, connection.model]);
  let model = models.get(key);
  if (!model) {
    if (models.size >= 256) models.delete(models.keys().next().value!);
    model = makeModel(connection);
    models.set(key, model);
    model.catch(() => models.delete(key));
  }
  return model;
}

/** An Anthropic model, at the provider interface of the SDK (one call, its parts streamed; no loop around it). */
async function makeModel(connection: ModelConnection): Promise<LanguageModelV4> {
  const { createAnthropic } = await import('@ai-sdk/anthropic');
  return createAnthropic({ ...(connection.baseUrl ? { baseURL: connection.baseUrl } : {}), apiKey: connection.apiKey ?? '', headers: connection.headers ?? {}, fetch: connection.fetch })(connection.model);
}

function toPrompt(system: string | undefined, messages: readonly ChatMessage[], wire: Map<string, string>): LanguageModelV4Prompt {
  const name = (tool: string) => wire.get(tool) ?? tool.replace(/[^A-Za-z0-9_-]/g, '_');
  const prompt: LanguageModelV4Prompt = system ? [{ role: 'system', content: system }] : [];
  for (const message of messages) {
    switch (message.role) {
      case 'system':
        prompt.push({ role: 'system', content: message.content });
        break;
      case 'user':
        prompt.push({
          role: 'user',
          content: typeof message.content === 'string'
            ? [{ type: 'text', text: message.content }]
            : message.content.map((part) => (part.type === 'text'
              ? { type: 'text' as const, text: part.text }
              : { type: 'file' as const, filename: part.name, mediaType: part.mimeType, data: { type: 'data' as const, data: part.data } })),
        });
        break;
      case 'assistant':
        prompt.push({
          role: 'assistant',
          content: [
            ...(message.content ? [{ type: 'text' as const, text: message.content }] : []),
            ...(message.toolCalls ?? []).map((call) => ({ type: 'tool-call' as const, toolCallId: call.id, toolName: name(call.name), input: call.args ?? {} })),
          ],
        });
        break;
      case 'tool': {
        const part = {
          type: 'tool-result' as const, toolCallId: message.toolCallId, toolName: name(message.toolName),
          output: message.isError
            ? { type: 'error-text' as const, value: typeof message.content === 'string' ? message.content : JSON.stringify(message.content) }
            : typeof message.content === 'string' ? { type: 'text' as const, value: message.content } : { type: 'json' as const, value: (message.content ?? null) as never },
        };
        // Results of one step's calls go back in one tool message.
        const last = prompt.at(-1);
        if (last?.role === 'tool') last.content.push(part);
        else prompt.push({ role: 'tool', content: [part] });
        break;
      }
    }
  }
  return prompt;
}

const parseArgs = (input: string): unknown => {
  try {
    return input ? parseJsonWithin(input) : {};
  } catch {
    // Arguments that are not JSON go to the tool as they are; its schema check turns them down with a reason the model can read.
    return input;
  }
};

/**
 * One model call, streamed: text deltas, the tool calls the model made, then
 * how it finished and what it used. The provider assembles tool calls from
 * their deltas and counts usage; the loop around calls is the agent runtime's.
 */
export async function* streamStep(connection: ModelConnection, request: StepRequest): AsyncGenerator<StepEvent> {
  const { wire, back } = toolNames(request.tools ?? []);
  if (connection.kind === 'openai-compatible') {
    if (!connection.baseUrl) throw new Error('the provider has no baseUrl');
    // Read by the gateway itself: the SDK's per-event validation and stream stages cost more than the rest of a chunk's path.
    const choice = request.toolChoice;
    const tools = (request.tools ?? []).map((spec) => ({ type: 'function' as const, function: { name: wire.get(spec.name)!, description: spec.description, parameters: spec.inputSchema } }));
    yield* streamChat(connection, request, tools, typeof choice === 'object' ? { type: 'function', function: { name: wire.get(choice.name) ?? choice.name } } : choice, {
      wire: (tool) => wire.get(tool) ?? tool.replace(/[^A-Za-z0-9_-]/g, '_'),
      back: (name) => back.get(name) ?? name,
    }, parseArgs);
    return;
  }
  const tools = (request.tools ?? []).map((spec) => ({ type: 'function' as const, name: wire.get(spec.name)!, description: spec.description, inputSchema: spec.inputSchema as never }));
  const choice = request.toolChoice;
  const model = await languageModel(connection);
  const { stream } = await model.doStream({
    prompt: toPrompt(request.system, request.messages, wire),
    ...(tools.length > 0 ? { tools } : {}),
    ...(choice && tools.length > 0 ? { toolChoice: typeof choice === 'object' ? { type: 'tool' as const, toolName: wire.get(choice.name) ?? choice.name } : { type: choice } } : {}),
    ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
    ...(request.maxOutputTokens === undefined ? {} : { maxOutputTokens: request.maxOutputTokens }),
    abortSignal: request.signal,
  });
  const reader = stream.getReader();
  try {
    for (;;) {
      const { value: part, done } = await reader.read();
      if (done) break;
      switch (part.type) {
        case 'text-delta':
          if (part.delta) yield { type: 'text', text: part.delta };
          break;
        case 'tool-call':
          yield { type: 'tool-call', call: { id: part.toolCallId, name: back.get(part.toolName) ?? part.toolName, args: parseArgs(part.input) } };
          break;
        case 'finish':
          yield {
            type: 'finish', finishReason: part.finishReason.unified,
            usage: { inputTokens: part.usage.inputTokens.total, outputTokens: part.usage.outputTokens.total, ...(part.usage.inputTokens.cacheRead ? { cachedInputTokens: part.usage.inputTokens.cacheRead } : {}) },
          };
          break;
        case 'error':
          throw part.error;
        default:
          break;
      }
    }
  } finally {
    reader.releaseLock();
    if (request.signal.aborted) await stream.cancel().catch(() => undefined);
  }
  if (request.signal.aborted) throw request.signal.reason;
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
