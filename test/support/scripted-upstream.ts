/**
 * A model provider that answers from a script, for what a real story model
 * cannot do on cue: tool calls the model chooses, errors, 429 with
 * Retry-After, a slow first token, a stall, malformed SSE, a dropped
 * connection. It speaks the OpenAI chat completions shape on
 * /v1/chat/completions and the Anthropic messages shape on /v1/messages, and
 * keeps every request it received.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export interface SseStep {
  /** An event's data (JSON-encoded unless a string). */
  data?: unknown;
  /** The SSE event name (Anthropic's streams name theirs). */
  event?: string;
  /** A comment line (": keepalive"). */
  comment?: string;
  /** Bytes written as they are (malformed SSE). */
  raw?: string;
  delayMs?: number;
  /** Ends the connection abruptly here. */
  drop?: true;
}

export interface SseReply { sse: SseStep[]; delayMs?: number }

export type Reply =
  | { status: number; headers?: Record<string, string>; json: unknown }
  | SseReply
  | { hang: true };

export interface Received {
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class ScriptedUpstream {
  readonly requests: Received[] = [];
  private readonly replies: Reply[] = [];
  private server?: Server;
  private readonly open = new Set<ServerResponse>();
  port = 0;
  /** Answers a request when no scripted reply is queued (an answer made from the question, say). */
  responder?: (request: Received) => Reply | undefined;

  get url(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.answer(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  /** Replies for the next requests, in order; with none queued, a request gets a short text answer. */
  enqueue(...replies: Reply[]): this {
    this.replies.push(...replies);
    return this;
  }

  reset(): void {
    this.replies.length = 0;
    this.requests.length = 0;
  }

  async stop(): Promise<void> {
    for (const res of this.open) res.destroy();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let text = '';
    for await (const chunk of req) text += chunk;
    const body = text ? JSON.parse(text) : {};
    const path = (req.url ?? '').split('?')[0]!;
    this.requests.push({ path, headers: req.headers, body });
    const reply = this.replies.shift() ?? this.responder?.({ path, headers: req.headers, body })
      ?? (path.endsWith('/messages') ? anthropicText('Hello from the script.') : openaiText('Hello from the script.'));
    this.open.add(res);
    res.on('close', () => this.open.delete(res));
    if ('hang' in reply) return;
    if ('json' in reply) {
      res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers }).end(JSON.stringify(reply.json));
      return;
    }
    if (reply.delayMs) await sleep(reply.delayMs);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (const step of reply.sse) {
      if (step.delayMs) await sleep(step.delayMs);
      if (res.destroyed) return;
      if (step.drop) {
        res.socket?.destroy();
        return;
      }
      if (step.raw !== undefined) res.write(step.raw);
      else if (step.comment !== undefined) res.write(`: ${step.comment}\n\n`);
      else res.write(`${step.event ? `event: ${step.event}\n` : ''}data: ${typeof step.data === 'string' ? step.data : JSON.stringify(step.data)}\n\n`);
    }
    res.end();
  }
}

const chunk = (delta: unknown, finish: string | null = null) => ({
  id: 'chatcmpl-script', object: 'chat.completion.chunk', created: 1, model: 'scripted', choices: [{ index: 0, delta, finish_reason: finish }],
});

/** A streamed OpenAI answer: the text in pieces, then usage and [DONE]. */
export function openaiText(text: string, usage = { prompt_tokens: 11, completion_tokens: 7 }, options: { pieces?: number; gapMs?: number } = {}): SseReply {
  const pieces = options.pieces ?? 3;
  const size = Math.ceil(text.length / pieces) || 1;
  const parts: SseStep[] = [{ data: chunk({ role: 'assistant', content: '' }) }];
  for (let at = 0; at < text.length; at += size) parts.push({ data: chunk({ content: text.slice(at, at + size) }), delayMs: options.gapMs });
  parts.push({ data: chunk({}, 'stop') });
  parts.push({ data: { ...chunk({}), choices: [], usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } } });
  parts.push({ data: '[DONE]' });
  return { sse: parts };
}

/** A streamed OpenAI answer that calls tools. */
export function openaiToolCalls(calls: { name: string; args: unknown; id?: string }[], usage = { prompt_tokens: 20, completion_tokens: 9 }): SseReply {
  return {
    sse: [
      { data: chunk({ role: 'assistant', content: null }) },
      ...calls.map((call, index) => ({
        data: chunk({ tool_calls: [{ index, id: call.id ?? `call_${index + 1}`, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.args) } }] }),
      })),
      { data: chunk({}, 'tool_calls') },
      { data: { ...chunk({}), choices: [], usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } } },
      { data: '[DONE]' },
    ],
  };
}

/** An OpenAI error answer. */
export const openaiError = (status: number, message: string, headers: Record<string, string> = {}): Reply => ({
  status, headers, json: { error: { message, type: status === 429 ? 'rate_limit_error' : 'server_error', code: null } },
});

/** A streamed Anthropic answer. */
export function anthropicText(text: string, usage = { input_tokens: 13, output_tokens: 5 }): SseReply {
  return {
    sse: [
      { event: 'message_start', data: { type: 'message_start', message: { id: 'msg_script', type: 'message', role: 'assistant', content: [], model: 'scripted', stop_reason: null, stop_sequence: null, usage: { input_tokens: usage.input_tokens, output_tokens: 1 } } } },
      { event: 'content_block_start', data: { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } } },
      { event: 'content_block_delta', data: { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } } },
      { event: 'content_block_stop', data: { type: 'content_block_stop', index: 0 } },
      { event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: usage.output_tokens } } },
      { event: 'message_stop', data: { type: 'message_stop' } },
    ],
  };
}

/** A streamed Anthropic answer that uses a tool. */
export function anthropicToolUse(name: string, args: unknown, id = 'toolu_1'): SseReply {
  return {
    sse: [
      { event: 'message_start', data: { type: 'message_start', message: { id: 'msg_tool', type: 'message', role: 'assistant', content: [], model: 'scripted', stop_reason: null, stop_sequence: null, usage: { input_tokens: 30, output_tokens: 1 } } } },
      { event: 'content_block_start', data: { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id, name, input: {} } } },
      { event: 'content_block_delta', data: { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: JSON.stringify(args) } } },
      { event: 'content_block_stop', data: { type: 'content_block_stop', index: 0 } },
      { event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 12 } } },
      { event: 'message_stop', data: { type: 'message_stop' } },
    ],
  };
}

/**
 * A responder that answers "Answer: <the last message>" after 300 ms, except the first request whose last message is
 * `hold`: that one hangs until its connection goes. A daemon killed while it hangs has no reply between the platform
 * taking it and the daemon writing that down (a reply caught there would go again: the outbox is at least once).
 */
export function answerHoldingOnce(hold: string): { responder: (request: Received) => Reply; held: () => boolean } {
  let held = false;
  return {
    responder: (request) => {
      const asked = String(request.body.messages.at(-1).content);
      if (asked === hold && !held) {
        held = true;
        return { hang: true };
      }
      return { ...openaiText(`Answer: ${asked}`), delayMs: 300 };
    },
    held: () => held,
  };
}
