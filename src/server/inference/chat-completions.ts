/**
 * POST /v1/chat/completions: the request checked field by field (unsupported
 * fields refused by name, never dropped), run by an agent (`gateway`,
 * `gateway/<agent>`) or a provider model on its own, answered whole or
 * streamed as chat.completion.chunk events with the usage before [DONE].
 */
import { randomUUID } from 'node:crypto';
import { isJsonObject, parseJsonWithin } from '../../shared/json.ts';
import type { Agents, RunEvent } from '../agents/module.ts';
import type { ChatMessage, ToolCallRecord, ToolSpec } from '../models/module.ts';
import { badField } from './errors.ts';
import type { InferenceCall } from './call.ts';

/** Fields taken and passed on, and fields taken and left aside because they change nothing the gateway does. */
const FIELDS = new Set([
  'model', 'messages', 'stream', 'stream_options', 'temperature', 'max_tokens', 'max_completion_tokens', 'tools', 'tool_choice', 'user', 'n',
  'top_p', 'stop', 'seed', 'parallel_tool_calls', 'metadata', 'store', 'response_format', 'logprobs', 'frequency_penalty', 'presence_penalty',
]);

export interface ChatRequest {
  model: string;
  conversation: ChatMessage[];
  system?: string;
  /** The last user message: the turn recorded in the session. */
  turn?: string;
  stream: boolean;
  includeUsage: boolean;
  temperature?: number;
  maxOutputTokens?: number;
  tools: ToolSpec[];
  toolChoice?: 'auto' | 'none' | 'required' | { name: string };
  user?: string;
}

function textOf(content: unknown, param: string): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((part, index) => {
      if (!isJsonObject(part) || (part.type !== 'text' && part.type !== 'input_text' && part.type !== 'output_text') || typeof part.text !== 'string') {
        throw badField(`${param}[${index}]`, `${param}[${index}]: only text parts are supported.`);
      }
      return part.text;
    }).join('');
  }
  throw badField(param, `${param} must be a string or an array of text parts.`);
}

/** Checks a tool definition of the client's; the schema is the function's parameters. */
export function clientTool(value: unknown, param: string, shape: 'chat' | 'responses'): ToolSpec {
  const fn = shape === 'chat' ? (isJsonObject(value) ? value.function : undefined) : value;
  if (!isJsonObject(value) || value.type !== 'function' || !isJsonObject(fn)) throw badField(param, `${param} must be {type: "function", ${shape === 'chat' ? 'function: {name, parameters}' : 'name, parameters'}}.`);
  if (typeof fn.name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(fn.name)) throw badField(`${param}.name`, `${param}: the function name must be 1-64 letters, digits, _ and -.`);
  if (fn.parameters !== undefined && !isJsonObject(fn.parameters)) throw badField(`${param}.parameters`, `${param}: parameters must be a JSON Schema object.`);
  return { name: fn.name, description: typeof fn.description === 'string' ? fn.description : '', inputSchema: (fn.parameters as Record<string, unknown>) ?? { type: 'object', properties: {} } };
}

export function toolChoiceOf(value: unknown, param: string, shape: 'chat' | 'responses'): ChatRequest['toolChoice'] {
  if (value === undefined) return undefined;
  if (value === 'auto' || value === 'none' || value === 'required') return value;
  const name = isJsonObject(value) && value.type === 'function' ? (shape === 'chat' ? (isJsonObject(value.function) ? value.function.name : undefined) : value.name) : undefined;
  if (typeof name === 'string') return { name };
  throw badField(param, `${param} must be "auto", "none", "required" or a function.`);
}

export function parseChatRequest(body: unknown): ChatRequest {
  if (!isJsonObject(body)) throw badField('body', 'The body must be a JSON object {model, messages, ...}.');
  const unknown = Object.keys(body).filter((key) => !FIELDS.has(key));
  if (unknown.length > 0) throw badField(unknown[0]!, `Unsupported field: ${unknown.join(', ')}.`, 'unsupported_parameter');
  if (typeof body.model !== 'string' || body.model.length === 0 || body.model.length > 256) throw badField('model', 'model is required: "gateway", "gateway/<agent>" or a model GET /v1/models lists.');
  if (body.n !== undefined && body.n !== 1) throw badField('n', 'n must be 1: the gateway answers one choice.', 'unsupported_value');
  if (body.logprobs !== undefined && body.logprobs !== false) throw badField('logprobs', 'logprobs are not supported.', 'unsupported_value');
  if (body.response_format !== undefined && !(isJsonObject(body.response_format) && body.response_format.type === 'text')) {
    throw badField('response_format', 'Only response_format {type: "text"} is supported.', 'unsupported_value');
  }
  if (body.stream !== undefined && typeof body.stream !== 'boolean') throw badField('stream', 'stream must be true or false.');
  if (body.stream_options !== undefined && !(isJsonObject(body.stream_options) && Object.keys(body.stream_options).every((key) => key === 'include_usage'))) {
    throw badField('stream_options', 'stream_options may hold include_usage only.');
  }
  if (body.temperature !== undefined && (typeof body.temperature !== 'number' || body.temperature < 0 || body.temperature > 2)) throw badField('temperature', 'temperature must be a number from 0 to 2.');
  const max = body.max_completion_tokens ?? body.max_tokens;
  if (max !== undefined && (!Number.isInteger(max) || (max as number) < 1)) throw badField(body.max_completion_tokens === undefined ? 'max_tokens' : 'max_completion_tokens', 'max_tokens must be a positive integer.');
  if (body.user !== undefined && (typeof body.user !== 'string' || body.user.length > 256)) throw badField('user', 'user must be a string of at most 256 characters.');
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw badField('messages', 'messages must be a non-empty array.');
  if (body.tools !== undefined && !Array.isArray(body.tools)) throw badField('tools', 'tools must be an array.');

  const system: string[] = [];
  const conversation: ChatMessage[] = [];
  const callNames = new Map<string, string>();
  body.messages.forEach((message: unknown, index: number) => {
    const param = `messages[${index}]`;
    if (!isJsonObject(message)) throw badField(param, `${param} must be an object {role, content}.`);
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(textOf(message.content, `${param}.content`));
        break;
      case 'user':
        conversation.push({ role: 'user', content: textOf(message.content, `${param}.content`) });
        break;
      case 'assistant': {
        const calls: ToolCallRecord[] = [];
        if (message.tool_calls !== undefined) {
          if (!Array.isArray(message.tool_calls)) throw badField(`${param}.tool_calls`, `${param}.tool_calls must be an array.`);
          message.tool_calls.forEach((call: unknown, n: number) => {
            const fn = isJsonObject(call) ? call.function : undefined;
            if (!isJsonObject(call) || typeof call.id !== 'string' || !isJsonObject(fn) || typeof fn.name !== 'string') throw badField(`${param}.tool_calls[${n}]`, `${param}.tool_calls[${n}] must be {id, type: "function", function: {name, arguments}}.`);
            let args: unknown = {};
            try {
              args = typeof fn.arguments === 'string' && fn.arguments ? parseJsonWithin(fn.arguments) : {};
            } catch {
              throw badField(`${param}.tool_calls[${n}].function.arguments`, `${param}.tool_calls[${n}].function.arguments is not valid JSON (nested at most 64 deep).`);
            }
            callNames.set(call.id, fn.name);
            calls.push({ id: call.id, name: fn.name, args });
          });
        }
        conversation.push({ role: 'assistant', content: textOf(message.content, `${param}.content`), ...(calls.length ? { toolCalls: calls } : {}) });
        break;
      }
      case 'tool': {
        if (typeof message.tool_call_id !== 'string') throw badField(`${param}.tool_call_id`, `${param}.tool_call_id is required.`);
        const name = callNames.get(message.tool_call_id);
        if (!name) throw badField(`${param}.tool_call_id`, `${param} answers tool call ${message.tool_call_id}, which no earlier assistant message made.`);
        conversation.push({ role: 'tool', toolCallId: message.tool_call_id, toolName: name, content: textOf(message.content, `${param}.content`) });
        break;
      }
      default:
        throw badField(`${param}.role`, `${param}.role must be system, developer, user, assistant or tool.`);
    }
  });
  if (conversation.length === 0) throw badField('messages', 'messages need at least one user message.');
  const last = conversation.at(-1)!;
  return {
    model: body.model,
    conversation,
    system: system.length ? system.join('\n\n') : undefined,
    turn: last.role === 'user' && typeof last.content === 'string' ? last.content : undefined,
    stream: body.stream === true,
    includeUsage: isJsonObject(body.stream_options) && body.stream_options.include_usage === true,
    temperature: body.temperature as number | undefined,
    maxOutputTokens: max as number | undefined,
    tools: ((body.tools as unknown[] | undefined) ?? []).map((tool, index) => clientTool(tool, `tools[${index}]`, 'chat')),
    toolChoice: toolChoiceOf(body.tool_choice, 'tool_choice', 'chat'),
    user: body.user as string | undefined,
  };
}

const FINISH: Record<string, string> = { stop: 'stop', length: 'length', 'tool-calls': 'tool_calls', 'content-filter': 'content_filter' };
export const finishReasonOf = (reason: string | undefined) => FINISH[reason ?? 'stop'] ?? 'stop';

const wireCall = (call: ToolCallRecord) => ({ id: call.id, type: 'function' as const, function: { name: call.name, arguments: JSON.stringify(call.args ?? {}) } });

/** Answers a chat completion request, whole or streamed. */
export async function chatCompletion(call: InferenceCall<ChatRequest>, agents: Agents): Promise<void> {
  const { request, http } = call;
  const id = `chatcmpl-${randomUUID().replace(/-/g, '')}`;
  const created = Math.floor(Date.now() / 1000);
  const agentToolCalls: { name: string; args: unknown; result?: unknown; error?: string }[] = [];
  const stream = request.stream ? call.openStream() : undefined;
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({ id, object: 'chat.completion.chunk', created, model: request.model, choices: [{ index: 0, delta, finish_reason: finish }] });
  // A text delta, the most frequent event by far, is written from its fixed parts: only the text is serialised.
  const textHead = `{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(request.model)},"choices":[{"index":0,"delta":{"content":`;
  const textChunk = (text: string) => `${textHead}${JSON.stringify(text)}},"finish_reason":null}]}`;
  let roleSent = false;
  const onEvent = (event: RunEvent) => {
    if (event.type === 'tool' && event.phase === 'result') agentToolCalls.push({ name: event.call.name, args: event.call.args, ...(event.error ? { error: event.error } : { result: event.result }) });
    if (!stream) return;
    if (!roleSent) {
      stream.send(chunk({ role: 'assistant', content: '' }));
      roleSent = true;
    }
    if (event.type === 'delta') stream.send(textChunk(event.text));
    else if (event.type === 'tool' && event.phase === 'result' && call.showAgentTools) {
      stream.send(chunk({ gateway_tool_call: { name: event.call.name, args: event.call.args, ...(event.error ? { error: event.error } : { result: event.result }) } }));
    }
  };
  try {
    const outcome = await call.run({
      conversation: request.conversation, system: request.system, turn: request.turn, clientTools: request.tools,
      overrides: { temperature: request.temperature, maxOutputTokens: request.maxOutputTokens, toolChoice: request.toolChoice },
      onEvent,
    });
    const pending = outcome.pendingClientCalls ?? [];
    const finish = pending.length > 0 ? 'tool_calls' : finishReasonOf(outcome.finishReason);
    const usage = call.usageOf(outcome.usage, 'chat');
    if (stream) {
      if (!roleSent) stream.send(chunk({ role: 'assistant', content: '' }));
      if (pending.length > 0) stream.send(chunk({ tool_calls: pending.map((tool, index) => ({ index, ...wireCall(tool) })) }));
      stream.send(chunk({}, finish));
      if (request.includeUsage && usage) stream.send({ id, object: 'chat.completion.chunk', created, model: request.model, choices: [], usage });
      stream.send('[DONE]');
      stream.end();
      return;
    }
    http.body = {
      id, object: 'chat.completion', created, model: request.model, system_fingerprint: null,
      choices: [{
        index: 0,
        message: {
          role: 'assistant', content: outcome.text || (pending.length ? null : ''), refusal: null,
          ...(pending.length ? { tool_calls: pending.map(wireCall) } : {}),
          ...(call.showAgentTools && agentToolCalls.length ? { gateway_tool_calls: agentToolCalls } : {}),
        },
        finish_reason: finish, logprobs: null,
      }],
      ...(usage ? { usage } : {}),
    };
  } catch (error) {
    if (!stream) throw error;
    call.failStream(stream, error);
  }
}
