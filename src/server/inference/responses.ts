/**
 * POST /v1/responses and GET /v1/responses/:id: responses stored in the
 * profile's database (unless store is false), so previous_response_id
 * continues a conversation after a restart; an unknown or foreign id is a
 * 404, never ignored. Streams the Responses event sequence, response.created
 * to response.completed.
 */
import { randomUUID } from 'node:crypto';
import { isJsonObject, parseJsonWithin } from '../../shared/json.ts';
import type { Agents, RunEvent } from '../agents/module.ts';
import { DomainError } from '../kernel/errors.ts';
import { apiPerson, callerPerson } from '../kernel/person.ts';
import type { ChatMessage, ToolCallRecord, ToolSpec } from '../models/module.ts';
import type { Store } from '../store/database.ts';
import type { Migration } from '../store/migrations.ts';
import { pruneRows } from '../store/retention.ts';
import { clientTool, toolChoiceOf, type ChatRequest } from './chat-completions.ts';
import { badField } from './errors.ts';
import type { InferenceCall } from './call.ts';

export const RESPONSE_MIGRATIONS: readonly Migration[] = [{
  version: 1,
  name: 'stored responses',
  was: { module: 'inference', version: 1 },
  sql: `
    CREATE TABLE responses (
      id TEXT PRIMARY KEY,
      owner TEXT NOT NULL,
      previous_id TEXT,
      messages TEXT NOT NULL,
      response TEXT NOT NULL,
      created_at BIGINT NOT NULL
    );
    CREATE INDEX responses_created ON responses (created_at);
  `,
}, {
  version: 2,
  name: 'the person each stored response was for',
  // Responses stored before are continued only by their owner acting for itself (no user): the person they were for was not kept.
  sql: 'ALTER TABLE responses ADD COLUMN person TEXT',
}];

const FIELDS = new Set([
  'model', 'input', 'instructions', 'previous_response_id', 'stream', 'store', 'tools', 'tool_choice', 'max_output_tokens', 'temperature', 'user',
  'metadata', 'text', 'parallel_tool_calls', 'top_p', 'truncation', 'include',
]);

export interface ResponsesRequest {
  model: string;
  /** The new turn's messages. */
  input: ChatMessage[];
  instructions?: string;
  previousId?: string;
  stream: boolean;
  store: boolean;
  tools: ToolSpec[];
  toolChoice?: ChatRequest['toolChoice'];
  maxOutputTokens?: number;
  temperature?: number;
  user?: string;
  metadata: Record<string, string>;
  raw: { tools: unknown[]; tool_choice: unknown };
}

function contentText(content: unknown, param: string): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((part, index) => {
      if (!isJsonObject(part) || !['input_text', 'output_text', 'text'].includes(String(part.type)) || typeof part.text !== 'string') {
        throw badField(`${param}[${index}]`, `${param}[${index}]: only text parts are supported.`);
      }
      return part.text;
    }).join('');
  }
  throw badField(param, `${param} must be a string or an array of text parts.`);
}

export function parseResponsesRequest(body: unknown): ResponsesRequest {
  if (!isJsonObject(body)) throw badField('body', 'The body must be a JSON object {model, input, ...}.');
  const unknown = Object.keys(body).filter((key) => !FIELDS.has(key));
  if (unknown.length > 0) throw badField(unknown[0]!, `Unsupported field: ${unknown.join(', ')}.`, 'unsupported_parameter');
  if (typeof body.model !== 'string' || body.model.length === 0 || body.model.length > 256) throw badField('model', 'model is required: "gateway", "gateway/<agent>" or a model GET /v1/models lists.');
  if (body.instructions !== undefined && body.instructions !== null && typeof body.instructions !== 'string') throw badField('instructions', 'instructions must be a string.');
  if (body.previous_response_id !== undefined && body.previous_response_id !== null && (typeof body.previous_response_id !== 'string' || !/^resp_[A-Za-z0-9]{1,64}$/.test(body.previous_response_id))) {
    throw badField('previous_response_id', 'previous_response_id must be the id of an earlier response (resp_...).');
  }
  for (const flag of ['stream', 'store'] as const) if (body[flag] !== undefined && typeof body[flag] !== 'boolean') throw badField(flag, `${flag} must be true or false.`);
  if (body.temperature !== undefined && (typeof body.temperature !== 'number' || body.temperature < 0 || body.temperature > 2)) throw badField('temperature', 'temperature must be a number from 0 to 2.');
  if (body.max_output_tokens !== undefined && (!Number.isInteger(body.max_output_tokens) || (body.max_output_tokens as number) < 1)) throw badField('max_output_tokens', 'max_output_tokens must be a positive integer.');
  if (body.user !== undefined && (typeof body.user !== 'string' || body.user.length > 256)) throw badField('user', 'user must be a string of at most 256 characters.');
  if (body.text !== undefined && !(isJsonObject(body.text) && (body.text.format === undefined || (isJsonObject(body.text.format) && body.text.format.type === 'text')))) {
    throw badField('text', 'Only text.format {type: "text"} is supported.', 'unsupported_value');
  }
  if (body.metadata !== undefined && !(isJsonObject(body.metadata) && Object.values(body.metadata).every((value) => typeof value === 'string'))) throw badField('metadata', 'metadata must map keys to strings.');
  if (body.tools !== undefined && !Array.isArray(body.tools)) throw badField('tools', 'tools must be an array.');

  const input: ChatMessage[] = [];
  const items = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : body.input;
  if (!Array.isArray(items) || items.length === 0) throw badField('input', 'input must be a string or a non-empty array of items.');
  const callNames = new Map<string, string>();
  items.forEach((item: unknown, index: number) => {
    const param = `input[${index}]`;
    if (!isJsonObject(item)) throw badField(param, `${param} must be an object.`);
    if (item.type === 'function_call') {
      if (typeof item.call_id !== 'string' || typeof item.name !== 'string') throw badField(param, `${param} must be {type: "function_call", call_id, name, arguments}.`);
      let args: unknown = {};
      try {
        args = typeof item.arguments === 'string' && item.arguments ? parseJsonWithin(item.arguments) : {};
      } catch {
        throw badField(`${param}.arguments`, `${param}.arguments is not valid JSON (nested at most 64 deep).`);
      }
      callNames.set(item.call_id, item.name);
      input.push({ role: 'assistant', content: '', toolCalls: [{ id: item.call_id, name: item.name, args }] });
    } else if (item.type === 'function_call_output') {
      if (typeof item.call_id !== 'string' || typeof item.output !== 'string') throw badField(param, `${param} must be {type: "function_call_output", call_id, output}.`);
      input.push({ role: 'tool', toolCallId: item.call_id, toolName: callNames.get(item.call_id) ?? '', content: item.output });
    } else if (item.type === undefined || item.type === 'message') {
      const text = contentText(item.content, `${param}.content`);
      if (item.role === 'user') input.push({ role: 'user', content: text });
      else if (item.role === 'assistant') input.push({ role: 'assistant', content: text });
      else if (item.role === 'system' || item.role === 'developer') input.push({ role: 'system', content: text });
      else throw badField(`${param}.role`, `${param}.role must be user, assistant, system or developer.`);
    } else {
      throw badField(`${param}.type`, `${param}: items of type ${String(item.type)} are not supported.`, 'unsupported_value');
    }
  });
  return {
    model: body.model, input, instructions: (body.instructions as string | undefined) ?? undefined,
    previousId: (body.previous_response_id as string | undefined) ?? undefined, stream: body.stream === true, store: body.store !== false,
    tools: ((body.tools as unknown[] | undefined) ?? []).map((tool, index) => clientTool(tool, `tools[${index}]`, 'responses')),
    toolChoice: toolChoiceOf(body.tool_choice, 'tool_choice', 'responses'),
    maxOutputTokens: body.max_output_tokens as number | undefined, temperature: body.temperature as number | undefined,
    user: body.user as string | undefined, metadata: (body.metadata as Record<string, string> | undefined) ?? {},
    raw: { tools: (body.tools as unknown[] | undefined) ?? [], tool_choice: body.tool_choice ?? 'auto' },
  };
}

/** Stored responses: each keeps the messages of its turn, so a chain rebuilds the whole conversation. */
export class ResponseStore {
  private readonly store: Store;

  constructor(store: Store) {
    this.store = store;
  }

  async save(entry: { id: string; owner: string; person: string; previousId?: string; messages: ChatMessage[]; response: Record<string, unknown> }): Promise<void> {
    await this.store.run('INSERT INTO responses (id, owner, person, previous_id, messages, response, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
      entry.id, entry.owner, entry.person, entry.previousId ?? null, JSON.stringify(entry.messages), JSON.stringify(entry.response), Date.now());
  }

  /** A stored response of this owner, or undefined (another owner's is as absent as a missing one). */
  async get(id: string, owner: string): Promise<Record<string, unknown> | undefined> {
    const row = await this.store.get<{ response: string }>('SELECT response FROM responses WHERE id = ? AND owner = ?', id, owner);
    return row ? JSON.parse(row.response) as Record<string, unknown> : undefined;
  }

  /**
   * The conversation up to and with a response: every turn of its chain,
   * oldest first. Only the person it was for continues it: one user of a
   * credential never has another's conversation put into their run (an
   * older response, whose person was not kept, only by its owner acting for
   * itself).
   */
  async conversation(id: string, owner: string, person: string, ownPerson: string): Promise<ChatMessage[] | undefined> {
    const turns: ChatMessage[][] = [];
    let next: string | null = id;
    for (let depth = 0; next && depth < 1000; depth++) {
      const row: { previous_id: string | null; messages: string } | undefined = await this.store.get(
        'SELECT previous_id, messages FROM responses WHERE id = ? AND owner = ? AND (person = ? OR (person IS NULL AND ? = ?))', next, owner, person, person, ownPerson);
      if (!row) return depth === 0 ? undefined : turns.reverse().flat();
      turns.push(JSON.parse(row.messages) as ChatMessage[]);
      next = row.previous_id;
    }
    return turns.reverse().flat();
  }

  async prune(retentionMs: number): Promise<number> {
    return pruneRows(this.store, 'responses', 'id', 'created_at < ?', Date.now() - retentionMs);
  }
}

/** Answers a Responses request, whole or streamed, and stores it. */
export async function createResponse(call: InferenceCall<ResponsesRequest>, agents: Agents, store: ResponseStore): Promise<void> {
  const { request, http } = call;
  const owner = call.principal.subject;
  const person = apiPerson(call.principal, request.user);
  let history: ChatMessage[] = [];
  if (request.previousId) {
    const found = await store.conversation(request.previousId, owner, person, callerPerson(call.principal));
    if (!found) throw new DomainError('not_found', `Previous response with id '${request.previousId}' not found.`, { code: 'previous_response_not_found', details: { param: 'previous_response_id' } });
    history = found;
  }
  const id = `resp_${randomUUID().replace(/-/g, '')}`;
  const messageId = `msg_${randomUUID().replace(/-/g, '')}`;
  const createdAt = Math.floor(Date.now() / 1000);
  const system = request.input.filter((message) => message.role === 'system').map((message) => message.content as string);
  const input = request.input.filter((message) => message.role !== 'system');
  const lastUser = [...input].reverse().find((message) => message.role === 'user');
  const base = (status: string, output: unknown[], usage?: Record<string, unknown>) => ({
    id, object: 'response', created_at: createdAt, status, model: request.model, output,
    previous_response_id: request.previousId ?? null, instructions: request.instructions ?? null,
    error: null, incomplete_details: null, usage: usage ?? null, tools: request.raw.tools, tool_choice: request.raw.tool_choice,
    temperature: request.temperature ?? null, top_p: null, max_output_tokens: request.maxOutputTokens ?? null,
    parallel_tool_calls: true, truncation: 'disabled', text: { format: { type: 'text' } }, store: request.store,
    user: request.user ?? null, metadata: request.metadata,
  });
  const stream = request.stream ? call.openStream() : undefined;
  let sequence = 0;
  const emit = (type: string, fields: Record<string, unknown>) => stream?.send({ type, sequence_number: sequence++, ...fields }, type);
  let opened = false;
  let text = '';
  const openMessage = () => {
    if (opened) return;
    opened = true;
    emit('response.output_item.added', { output_index: 0, item: { id: messageId, type: 'message', status: 'in_progress', role: 'assistant', content: [] } });
    emit('response.content_part.added', { item_id: messageId, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
  };
  emit('response.created', { response: base('in_progress', []) });
  emit('response.in_progress', { response: base('in_progress', []) });
  try {
    const outcome = await call.run({
      conversation: [...history, ...input], system: [request.instructions, ...system].filter(Boolean).join('\n\n') || undefined,
      turn: input.at(-1)?.role === 'user' ? lastUser?.content as string : undefined, clientTools: request.tools,
      overrides: { temperature: request.temperature, maxOutputTokens: request.maxOutputTokens, toolChoice: request.toolChoice },
      onEvent: (event: RunEvent) => {
        if (event.type !== 'delta') return;
        openMessage();
        text += event.text;
        emit('response.output_text.delta', { item_id: messageId, output_index: 0, content_index: 0, delta: event.text, logprobs: [] });
      },
    });
    const pending = outcome.pendingClientCalls ?? [];
    const message = { id: messageId, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: outcome.text, annotations: [] }] };
    const calls = pending.map((tool: ToolCallRecord) => ({ id: `fc_${tool.id}`, type: 'function_call', status: 'completed', call_id: tool.id, name: tool.name, arguments: JSON.stringify(tool.args ?? {}) }));
    const output = [...(outcome.text || calls.length === 0 ? [message] : []), ...calls];
    const response = base('completed', output, call.usageOf(outcome.usage, 'responses'));
    if (request.store) {
      const turn: ChatMessage[] = [...input, { role: 'assistant', content: outcome.text, ...(pending.length ? { toolCalls: pending } : {}) }];
      await store.save({ id, owner, person, previousId: request.previousId, messages: turn, response });
    }
    if (stream) {
      if (outcome.text || calls.length === 0) {
        openMessage();
        emit('response.output_text.done', { item_id: messageId, output_index: 0, content_index: 0, text: outcome.text, logprobs: [] });
        emit('response.content_part.done', { item_id: messageId, output_index: 0, content_index: 0, part: message.content[0] });
        emit('response.output_item.done', { output_index: 0, item: message });
      }
      for (const item of calls) {
        const outputIndex = output.indexOf(item);
        emit('response.output_item.added', { output_index: outputIndex, item: { ...item, status: 'in_progress', arguments: '' } });
        emit('response.function_call_arguments.delta', { item_id: item.id, output_index: outputIndex, delta: item.arguments });
        emit('response.function_call_arguments.done', { item_id: item.id, output_index: outputIndex, arguments: item.arguments });
        emit('response.output_item.done', { output_index: outputIndex, item });
      }
      emit('response.completed', { response });
      stream.end();
      return;
    }
    http.body = { ...response, output_text: outcome.text };
  } catch (error) {
    if (!stream) throw error;
    call.failStream(stream, error, (body) => ({ event: 'error', data: { type: 'error', sequence_number: sequence++, code: body.error.code ?? body.error.type, message: body.error.message, param: body.error.param } }));
  }
}
