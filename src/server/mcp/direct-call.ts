/**
 * tools/call as one POST over the session the MCP client opened: the
 * JSON-RPC request written and its answer read straight from node:http,
 * a JSON body or an event stream, without the client's stream stages and
 * message schemas (about a third of a millisecond per call). Messages of the
 * server that are not the answer (notifications, its own requests) go to
 * the MCP client as its transport would hand them over, and a stream the
 * server closes before answering is resumed from its last event id, as the
 * client would. Whatever needs more than this (a login, a lost session, a
 * redirect) is handed back untouched: the server ran nothing, and the
 * caller makes the call through the MCP client.
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import { isJsonObject } from '../../shared/json.ts';
import { agentFor, fetchFailed } from '../kernel/upstream-fetch.ts';

/** The server's JSON-RPC error for the call. */
export class McpCallError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

/** The call did not finish within its time. */
export class McpCallTimeout extends Error {}

export interface DirectCall {
  url: URL;
  /** Every header of the POST but the body's (the server's static headers, the login, the session, the protocol version). */
  headers: Record<string, string>;
  id: string;
  name: string;
  args: Record<string, unknown>;
  timeoutMs: number;
  /** A message of the server that is not this call's answer, for the MCP client. */
  deliver: (message: Record<string, unknown>) => void;
}

/** The most a call's answer may hold: beyond it the server is not answering a tool call. */
const MAX_ANSWER_BYTES = 32 * 1024 * 1024;
/** How many times a stream the server closes before the answer is taken up again. */
const MAX_RESUMES = 5;
/** What the server asks a client to wait before it resumes a stream, at most. */
const MAX_RETRY_MS = 10_000;


/** The media type of a Content-Type, without its parameters, in lower case. */
const mediaType = (header: string | undefined) => (header ?? '').split(';')[0]!.trim().toLowerCase();

/**
 * Makes the call; resolves with the tool's result, or undefined when the
 * server refused it before running anything (401, 403, 404 for the
 * session, a redirect) and the MCP client should make it instead.
 */
export function callToolDirect(call: DirectCall): Promise<Record<string, unknown> | undefined> {
  return new Promise((resolve, reject) => {
    let current: ClientRequest | undefined;
    let finished = false;
    let resumes = 0;
    const timer = setTimeout(() => finish(new McpCallTimeout(`no answer within ${call.timeoutMs} ms`)), call.timeoutMs);
    const finish = (outcome: Error | Record<string, unknown> | undefined) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      if (outcome instanceof Error) {
        current?.destroy();
        reject(outcome);
      } else resolve(outcome);
    };

    /** A message of the server: this call's answer settles it; anything else is the client's. */
    const heard = (message: unknown) => {
      if (!isJsonObject(message)) return;
      if (message.id === call.id && !('method' in message)) {
        if (isJsonObject(message.error)) {
          const { code, message: text } = message.error;
          finish(new McpCallError(typeof code === 'number' ? code : -32603, typeof text === 'string' ? text : 'the server failed the call'));
        } else if (isJsonObject(message.result)) finish(message.result);
        else finish(new McpCallError(-32603, 'the server answered without a result'));
        return;
      }
      if (typeof message.method === 'string') call.deliver(message);
    };

    const send = (method: 'POST' | 'GET', headers: Record<string, string>, body?: string) => {
      // node:https (and TLS) loads at the first call that needs it: a daemon that never makes one never pays for it.
      const request = process.getBuiltinModule(call.url.protocol === 'https:' ? 'node:https' : 'node:http').request(call.url, { method, headers, agent: agentFor(call.url.protocol) }, (response) => {
        // Whatever becomes of the answer, a connection that breaks under it fails the call (once it has not finished).
        response.on('error', (error) => finish(fetchFailed(error)));
        if (finished) {
          response.destroy();
          return;
        }
        const status = response.statusCode ?? 502;
        if (method === 'POST' && (status === 401 || status === 403 || (status === 404 && call.headers['mcp-session-id']) || (status >= 300 && status < 400))) {
          response.resume();
          finish(undefined);
          return;
        }
        if (status < 200 || status >= 300 || status === 202 || status === 204) {
          readText(response, 4096, 'cut').then((text) => finish(new Error(`the server answered HTTP ${status}${text ? `: ${text}` : ''}`)), finish);
          return;
        }
        const type = mediaType(response.headers['content-type']);
        if (type === 'text/event-stream') readEvents(response);
        else if (type === 'application/json' && method === 'POST') {
          readText(response, MAX_ANSWER_BYTES, 'fail').then((text) => {
            let parsed: unknown;
            try {
              parsed = JSON.parse(text);
            } catch {
              throw new Error('the server answered with JSON it could not parse');
            }
            for (const message of Array.isArray(parsed) ? parsed : [parsed]) heard(message);
            if (!finished) throw new Error('the server answered without this call\'s result');
          }).catch(finish);
        } else {
          response.resume();
          finish(new Error(`the server answered with an unexpected content type: ${response.headers['content-type'] ?? 'none'}`));
        }
      });
      current = request;
      request.on('error', (error) => finish(fetchFailed(error)));
      request.end(body);
    };

    /** Reads a stream of events until it ends: an event's data is a JSON-RPC message; a stream ended before the answer is resumed. */
    const readEvents = (response: IncomingMessage) => {
      const parser = new EventStreamParser((data) => {
        let message: unknown;
        try {
          message = JSON.parse(data);
        } catch {
          return;
        }
        heard(message);
      });
      let received = 0;
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        received += chunk.length;
        if (received > MAX_ANSWER_BYTES && !finished) {
          finish(new Error('the server\'s answer is too large'));
          return;
        }
        parser.push(chunk);
      });
      response.once('end', () => {
        if (finished) return;
        parser.push('\n\n');
        if (finished) return;
        if (parser.lastEventId === undefined || resumes >= MAX_RESUMES) {
          finish(new Error('the server closed the call\'s stream before answering'));
          return;
        }
        resumes++;
        setTimeout(() => {
          if (!finished) send('GET', { ...call.headers, accept: 'text/event-stream', 'last-event-id': parser.lastEventId! });
        }, Math.min(parser.retryMs ?? 0, MAX_RETRY_MS));
      });
      response.once('close', () => {
        if (!response.complete && !finished) finish(fetchFailed(new Error('the server closed the connection mid-answer')));
      });
    };

    const body = JSON.stringify({ jsonrpc: '2.0', id: call.id, method: 'tools/call', params: { name: call.name, arguments: call.args } });
    send('POST', { ...call.headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'content-length': String(Buffer.byteLength(body)) }, body);
  });
}

/** A body as text, up to a bound: beyond it the reading fails, or (for an error's text) stops with what came. */
function readText(response: IncomingMessage, limit: number, beyond: 'fail' | 'cut'): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => {
      if (text.length + chunk.length > limit) {
        response.destroy();
        if (beyond === 'cut') {
          resolve(`${(text + chunk).slice(0, limit).trim()}...`);
          return;
        }
        reject(new Error('the server\'s answer is too large'));
        return;
      }
      text += chunk;
    });
    response.once('end', () => resolve(text.trim()));
    response.on('error', reject);
  });
}

/**
 * The server-sent events format, incrementally: each event's data (lines
 * joined by newlines), dispatched at its blank line; the last event id and
 * the retry the server asked for, kept for a resumption. Events with a type
 * other than "message" carry no JSON-RPC message and are skipped.
 */
export class EventStreamParser {
  lastEventId: string | undefined;
  retryMs: number | undefined;
  private buffer = '';
  private data: string[] = [];
  private type = '';
  private readonly dispatch: (data: string) => void;

  constructor(dispatch: (data: string) => void) {
    this.dispatch = dispatch;
  }

  push(chunk: string): void {
    this.buffer += chunk;
    let start = 0;
    for (;;) {
      const cr = this.buffer.indexOf('\r', start);
      const lf = this.buffer.indexOf('\n', start);
      const end = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf);
      if (end === -1) break;
      // A CR at the end of what came may be the first half of a CRLF: wait for the next chunk.
      if (end === cr && cr === this.buffer.length - 1) break;
      this.line(this.buffer.slice(start, end));
      start = end + (end === cr && this.buffer[cr + 1] === '\n' ? 2 : 1);
    }
    this.buffer = this.buffer.slice(start);
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0 && (this.type === '' || this.type === 'message')) this.dispatch(this.data.join('\n'));
      this.data = [];
      this.type = '';
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.type = value;
    else if (field === 'id' && !value.includes('\u0000')) this.lastEventId = value;
    else if (field === 'retry' && /^\d+$/.test(value)) this.retryMs = Number(value);
  }
}
