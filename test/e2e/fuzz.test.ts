import { expect } from 'chai';
import AjvModule from 'ajv';
import formatsModule from 'ajv-formats';
import fc from 'fast-check';
import { createHmac, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { connect as netConnect } from 'node:net';
import { ErrorCodes } from '../../src/shared/protocol/error-codes.ts';
import { METHODS } from '../../src/shared/protocol/methods.ts';
import { freePort, Home, waitFor } from '../support/cli.ts';
import { fromSchema, headerValue, mutated, nastyJson, nastyString, type Hints } from '../support/fuzz.ts';
import { StrictMcp } from '../support/mcp.ts';
import { ScriptedUpstream } from '../support/scripted-upstream.ts';
import { pushPayload } from '../support/webhooks.ts';
import { newDevice, RawSocket } from '../support/ws-client.ts';

const Ajv = AjvModule.default;
const addFormats = formatsModule.default;

// At least 10,000 generated inputs in every run; GATEWAY_FUZZ_SCALE=10 for a longer hunt.
const SCALE = Number(process.env.GATEWAY_FUZZ_SCALE ?? 1);
const RUNS = { http: 10_000 * SCALE, raw: 500 * SCALE, connect: 500 * SCALE, rpc: 5000 * SCALE };

const WEBHOOK_SECRET = 'fuzz-webhook-secret-5b1e0c';
const HOOKS_TOKEN = 'fuzz-hooks-token-8d2f71aa';
const API_KEY = 'sk-fuzz-provider-key-31c9e7';
const BODY_LIMIT = 4096;
const HTTP_METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'TRACE', 'PROPFIND', 'MKCOL'];
/** What a stack trace, a source path or a home folder looks like in an answer. */
const LEAK = /\n\s+at |node:internal|\.[cm]?[jt]s:\d+|\/tmp\/gateway-test|\/work\/|\/root\/|ERR_[A-Z_]{4,}|SQLITE_/;

interface Answer { status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }

describe('hostile input, generated: every surface answers as documented and the daemon stays up (e2e)', function () {
  this.timeout(600_000);
  let home: Home;
  let upstream: ScriptedUpstream;
  let mcp: StrictMcp;
  let port: number;
  let token: string;
  let adminToken: string;
  let readerToken: string;
  let pid: number;
  let document: any;
  let ajv: InstanceType<typeof Ajv>;
  let secrets: string[];
  let toolNames: string[];
  /** Ids of real tokens and jobs, so generated paths find something now and then. */
  const known: string[] = [];
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });

  const rssMb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
  const openFds = () => readdirSync(`/proc/${pid}/fd`).length;
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  before(async () => {
    [upstream, mcp] = await Promise.all([new ScriptedUpstream().start(), new StrictMcp({ open: true }).start()]);
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    const config = async (key: string, value: unknown) => expect((await home.run(['config', 'set', key, JSON.stringify(value)])).code).to.equal(0);
    expect((await home.run(['profiles', 'create', 'default', '--secrets', 'file'])).code).to.equal(0);
    await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: WEBHOOK_SECRET });
    await home.run(['secrets', 'set', 'models.providers.scripted.apiKey'], { input: API_KEY });
    await home.run(['hooks', 'token', 'set'], { input: HOOKS_TOKEN });
    await config('models', {
      providers: { scripted: { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], embeddingModels: ['e'], retries: { max: 0 }, timeouts: { totalMs: 5000, firstTokenMs: 2000, stallMs: 2000 } } },
    });
    await config('agents', { main: { model: 'scripted/m', tools: ['jobs.get', 'gateway.status'], maxSteps: 2, clientTools: true } });
    await config('gateway.http', {
      maxBodyBytes: BODY_LIMIT,
      endpoints: { chatCompletions: { enabled: true }, responses: { enabled: true }, embeddings: { enabled: true }, models: { enabled: true } },
    });
    // The budgets are tested on their own; here they would turn most inputs into 429.
    await config('gateway.rateLimit.max', 10_000_000);
    await config('hooks', {
      enabled: true, maxBodyBytes: BODY_LIMIT, allowedSessionKeyPrefixes: ['hook:'], defaultSessionKey: 'hook:fuzz',
      mappings: [
        { name: 'job', action: 'job', kind: 'gmail.push' },
        { name: 'wake', action: 'wake' },
        { name: 'say', action: 'message', channel: 'irc', to: 'nobody', text: 'hello {{name}}' },
        { name: 'picky', action: 'job', kind: 'gmail.push', match: { field: 'kind', equals: 'x' } },
      ],
    });
    // An MCP server's tool among the tools, allowed over HTTP: fuzzed calls reach it.
    expect((await home.run(['mcp', 'add', 'fz', mcp.url])).code).to.equal(0);
    await config('gateway.tools.allow', ['mcp.*']);
    expect((await home.run(['start'])).code).to.equal(0);
    token = home.token();
    pid = home.lock().pid;
    const created = async (scopes: string[]) => JSON.parse((await home.run(['tokens', 'create', '--name', 'fuzz', ...scopes.flatMap((scope) => ['--scope', scope]), '--json'])).stdout) as { id: string; token: string };
    const admin = await created(['admin']);
    adminToken = admin.token;
    readerToken = (await created(['jobs:read'])).token;
    known.push(admin.id, (await created(['jobs:read'])).id);
    secrets = [token, adminToken, readerToken, WEBHOOK_SECRET, HOOKS_TOKEN, API_KEY];

    const payload = JSON.stringify(pushPayload(400));
    const delivered = await send('POST', '/webhooks', {
      'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': randomUUID(),
      'x-hub-signature-256': `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(payload).digest('hex')}`,
    }, payload);
    known.push(JSON.parse(delivered.body.toString()).jobId);
    const response = await send('POST', '/v1/responses', { 'content-type': 'application/json', authorization: `Bearer ${token}` }, JSON.stringify({ model: 'gateway', input: 'hi' }));
    known.push(JSON.parse(response.body.toString()).id);
    document = JSON.parse((await send('GET', '/openapi.json', {})).body.toString());
    ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    for (const [name, schema] of Object.entries(document.components.schemas)) ajv.addSchema(schema as object, `#/components/schemas/${name}`);
    const listed = async () => {
      const catalog = JSON.parse((await home.run(['tools', 'list', '--json'])).stdout);
      return (catalog.tools ?? catalog).map((tool: { name: string }) => tool.name) as string[];
    };
    toolNames = await waitFor(async () => {
      const names = await listed();
      return names.includes('mcp.fz.echo') ? names : undefined;
    }, 20_000, 'the MCP server\'s tools');
    expect(toolNames).to.include('jobs.get');
  });
  after(async () => {
    agent.destroy();
    home?.cleanup();
    await Promise.all([upstream?.stop(), mcp?.stop()]);
  });

  /** One request with any method, path, headers and body; the answer whole. */
  function send(method: string, path: string, headers: Record<string, string>, body?: Buffer | string): Promise<Answer> {
    return new Promise((resolve, reject) => {
      // A body always goes with its length: node sends a GET's body unframed, which would be read as the next request.
      const framed = body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) };
      const request = httpRequest({ host: '127.0.0.1', port, method, path, headers: framed, agent, timeout: 30_000 }, (incoming) => {
        const chunks: Buffer[] = [];
        incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
        incoming.on('end', () => resolve({ status: incoming.statusCode!, headers: incoming.headers, body: Buffer.concat(chunks) }));
        incoming.on('error', reject);
      });
      request.on('timeout', () => request.destroy(new Error(`no answer in 30 s to ${method} ${path}`)));
      request.on('error', reject);
      request.end(body);
    });
  }

  /** The documented operation a concrete path and method fall under, if any. */
  function operationOf(method: string, path: string): { template: string; operation?: any; item: any } | undefined {
    // The router skips empty segments: /a//b/ is /a/b.
    const bare = path.split('?')[0]!.replace(/\/{2,}/g, '/').replace(/(.)\/$/, '$1');
    for (const [template, item] of Object.entries<any>(document.paths)) {
      const pattern = new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`);
      if (pattern.test(bare)) return { template, item, operation: item[method.toLowerCase()] ?? (method === 'HEAD' ? item.get : undefined) };
    }
    return undefined;
  }

  const validators = new Map<string, ReturnType<InstanceType<typeof Ajv>['compile']>>();
  const validator = (key: string, schema: object) => {
    let validate = validators.get(key);
    if (!validate) validators.set(key, validate = ajv.compile(schema));
    return validate;
  };

  /** What every answer must be: no server error, nothing leaked, each documented answer in its documented shape. */
  function judge(method: string, path: string, answer: Answer, what: string): void {
    const text = answer.body.toString();
    const shown = `${what}\n→ ${answer.status} ${text.slice(0, 400)}`;
    const headerText = JSON.stringify(answer.headers);
    for (const secret of secrets) {
      if (text.includes(secret) || headerText.includes(secret)) throw new Error(`a secret in the answer: ${shown}`);
    }
    // An operator's status names the log file; an error names no path, stack or internal code.
    if (answer.status >= 400 && LEAK.test(text)) throw new Error(`a stack, a path or an internal code in the answer: ${shown}`);
    // Headers past what the server reads are refused before any route: the common error body, on every path.
    if (answer.status === 431) {
      if (!validator('Error', { $ref: '#/components/schemas/Error' })(JSON.parse(text))) throw new Error(`431 outside the Error shape: ${shown}`);
      return;
    }
    const found = operationOf(method, path);
    const documented = found?.operation?.responses?.[String(answer.status)];
    // A server error only where the operation documents unavailability (an upstream or the disk): never a crash.
    if (answer.status >= 500 && !((answer.status === 502 || answer.status === 503) && documented)) throw new Error(`a server error: ${shown}`);
    if (method === 'HEAD' || answer.status === 204 || answer.status === 304) return;
    const type = String(answer.headers['content-type'] ?? '');
    if (answer.status >= 400) {
      if (!type.startsWith('application/json')) throw new Error(`an error that is not JSON: ${shown}`);
      const body = JSON.parse(text);
      if (!found) {
        // Outside the documented paths: the common error body, or under /v1 the inference API's.
        const shape = /^\/+v1(\/|$)/.test(path) ? 'InferenceError' : 'Error';
        if (!validator(shape, { $ref: `#/components/schemas/${shape}` })(body)) throw new Error(`an error outside the ${shape} shape: ${shown}`);
        return;
      }
      if (!found.operation) {
        // Another method: 405 with Allow, unless a check that comes first refused it (a credential in the query, the budget), in the path's own error shape.
        if (answer.status === 405 ? !answer.headers.allow : answer.status !== 400 && answer.status !== 429) throw new Error(`another method on a documented path must be 405 with Allow: ${shown}`);
        const sibling = Object.values<any>(found.item).find((operation) => operation?.responses?.[String(answer.status)]);
        const schema = sibling?.responses[String(answer.status)].content?.['application/json']?.schema;
        if (schema && !validator(`${found.template} ${answer.status}`, schema)(body)) throw new Error(`not the path's error shape: ${shown}`);
        return;
      }
    }
    if (!found?.operation) return;
    if (!documented) throw new Error(`${answer.status} is not documented for ${method} ${found.template}: ${shown}`);
    const schema = documented.content?.['application/json']?.schema;
    if (!schema) return;
    if (type.startsWith('text/event-stream')) {
      if (!documented.content['text/event-stream']) throw new Error(`an undocumented stream: ${shown}`);
      return;
    }
    const validate = validator(`${method} ${found.template} ${answer.status}`, schema);
    if (!validate(JSON.parse(text))) throw new Error(`not the documented shape (${ajv.errorsText(validate.errors)}): ${shown}`);
  }

  it(`answers ${RUNS.http} generated HTTP requests on every documented and undocumented path as documented`, async () => {
    const rssBefore = rssMb();
    const fdsBefore = openFds();
    const components = document.components.schemas;
    const hints: Hints = {
      tool: fc.constantFrom(...toolNames, 'nope', 'gateway.reload', 'message.send'),
      model: fc.constantFrom('gateway', 'gateway/main', 'gateway/nope', 'scripted/m', 'scripted/e', 'nope/x', 'm'),
      scopes: fc.array(fc.constantFrom('admin', 'jobs:read', 'jobs:write', 'tokens:read', 'tokens:write', 'tools:invoke', 'inference', 'nope'), { maxLength: 3 }),
      role: fc.constantFrom('user', 'system', 'assistant', 'tool', 'developer'),
      content: fc.oneof(fc.string({ maxLength: 60 }), fc.constant([{ type: 'text', text: 'hi' }])),
      messages: fc.array(fc.record({ role: fc.constantFrom('user', 'system', 'assistant', 'tool'), content: fc.string({ maxLength: 40 }) }), { maxLength: 3 }),
      input: fc.oneof(fc.string({ maxLength: 40 }), fc.array(fc.string({ maxLength: 20 }), { maxLength: 3 })),
      stream: fc.boolean(),
      previous_response_id: fc.constantFrom('resp_nope', 'resp_', ''),
      sessionKey: fc.constantFrom('hook:a', 'hook:', 'irc:default:dm:x', ''),
      kind: fc.constantFrom('store.prune', 'gmail.push', 'x'),
    };
    // Examples that pass the first checks, to be spoiled a little.
    const examples: Record<string, unknown[]> = {
      'POST /tokens': [{ name: 'fuzzed', scopes: ['jobs:read'], expiresAt: '2030-01-01T00:00:00Z' }],
      'POST /tools/invoke': [
        { tool: 'jobs.get', args: { id: 'job_x' } }, { tool: 'gateway.status', args: {} }, { tool: 'jobs.enqueue', args: { kind: 'store.prune' }, dryRun: true },
        { tool: 'mcp.fz.echo', args: { text: 'hi' } }, { tool: 'mcp.fz.echo', args: { text: 'ünïcødé ✓ 𝄞 \u2028' } },
        { tool: 'mcp.fz.echo', args: { text: '' }, idempotencyKey: 'fz' }, { tool: 'mcp.fz.echo', args: { text: 'x'.repeat(3000) } },
      ],
      'POST /v1/chat/completions': [
        { model: 'gateway', messages: [{ role: 'user', content: 'hi' }], stream: false },
        { model: 'gateway/main', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } },
      ],
      'POST /v1/responses': [{ model: 'gateway', input: 'hi' }, { model: 'gateway', input: 'hi', stream: true }],
      'POST /v1/embeddings': [{ model: 'scripted/e', input: 'hi' }],
      'POST /hooks/{name}': [{ name: 'x', kind: 'x', sessionKey: 'hook:a' }],
    };

    const operations: { method: string; template: string; operation: any }[] = [];
    for (const [template, item] of Object.entries<any>(document.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) if (operation?.responses) operations.push({ method: method.toUpperCase(), template, operation });
    }
    expect(operations.length).to.be.greaterThan(10);

    const segment = fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...known) },
      { weight: 4, arbitrary: fc.constantFrom('job_x', 'tok_x', 'resp_x', 'job', 'x', 'wake', 'job', 'say', 'picky', 'a.b', '%2e%2e', '..', '%00', '%ff', '%E2%80%AE', '', '~', ';x=1') },
      { weight: 2, arbitrary: nastyString.map(encode) },
      { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 20 }).map((text) => text.replace(/[^\x21-\x7e]/g, '').replace(/[#?]/g, '')) },
    );
    const pathOf = (template: string) => fc.array(segment, { minLength: 4, maxLength: 4 }).map((parts) => {
      let index = 0;
      return template.replace(/\{[^}]+\}/g, () => parts[index++] || 'x');
    });
    const queryKey = fc.constantFrom('limit', 'cursor', 'status', 'kind', 'token', '%74oken', 'token[]', 'access_token', 'api_key', 'x', 'since');
    const query = fc.oneof(
      { weight: 5, arbitrary: fc.constant('') },
      { weight: 1, arbitrary: fc.array(fc.tuple(queryKey, fc.oneof(fc.constantFrom('1', '0', '-1', '201', 'abc', 'queued', ''), nastyString.map(encode))), { minLength: 1, maxLength: 3 })
        .map((pairs) => `?${pairs.map(([key, value]) => `${key}=${value}`).join('&')}`) },
    );
    // Mostly a credential that passes, so requests reach the handlers; every kind of wrong one now and then.
    const credentialFor = (template: string) => fc.oneof(
      { weight: 6, arbitrary: fc.constant(template.startsWith('/hooks') ? 'hooks' : 'gateway') },
      { weight: 3, arbitrary: fc.constant('admin') },
      { weight: 3, arbitrary: fc.constantFrom<string | undefined>(undefined, 'gateway', 'reader', 'hooks', 'junk', 'revoked-shape', 'basic', 'empty') },
    );
    const credential = credentialFor('');
    const contentType = fc.oneof(
      { weight: 8, arbitrary: fc.constant<string | undefined>('application/json') },
      { weight: 2, arbitrary: fc.constantFrom<string | undefined>(
        'application/json; charset=utf-8', 'APPLICATION/JSON', 'text/plain', 'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x', 'application/json; charset=latin1', 'application/jsonx', '', undefined,
      ) },
    );
    const bodyFor = (key: string, requestSchema: unknown) => fc.oneof(
      { weight: 5, arbitrary: fromSchema(requestSchema as object, components, hints).map((value) => JSON.stringify(value) ?? '') },
      { weight: 2, arbitrary: examples[key] ? fc.constantFrom(...examples[key]).map((value) => JSON.stringify(value)) : fc.constant('{}') },
      { weight: 3, arbitrary: examples[key] ? fc.constantFrom(...examples[key]).chain(mutated).map((value) => JSON.stringify(value) ?? '') : fc.constant('{}') },
      { weight: 1, arbitrary: nastyJson.map((value) => JSON.stringify(value) ?? '') },
      { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)) },
      { weight: 1, arbitrary: fc.integer({ min: BODY_LIMIT - 64, max: BODY_LIMIT * 3 }).map((size) => `{"pad":"${'x'.repeat(size)}"}`) },
      { weight: 1, arbitrary: fc.integer({ min: 65, max: 3000 }).map((depth) => `{"a":${'['.repeat(depth)}${']'.repeat(depth)}}`) },
      { weight: 1, arbitrary: fc.constant('') },
    );

    const requestArb = fc.oneof(
      // A documented operation, its method mostly right, its body drawn from its schema.
      { weight: 8, arbitrary: fc.oneof(...operations.map(({ method, template, operation }) => {
        const key = `${method} ${template}`;
        const requestSchema = operation.requestBody?.content?.['application/json']?.schema;
        return fc.record({
          method: fc.oneof({ weight: 6, arbitrary: fc.constant(method) }, { weight: 1, arbitrary: fc.constantFrom(...HTTP_METHODS) }),
          path: pathOf(template), query, credential: credentialFor(template), contentType,
          body: method === 'GET' ? fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: bodyFor(key, requestSchema) }) : bodyFor(key, requestSchema),
          extra: fc.dictionary(fc.constantFrom('idempotency-key', 'x-gateway-session', 'x-gateway-model', 'accept', 'content-encoding', 'x-forwarded-for', 'origin', 'x-request-id', 'x-gateway-token'), headerValue, { maxKeys: 2 }),
        });
      })) },
      // A webhook delivery: signed right more often than not, with events and payloads GitHub never sent.
      { weight: 3, arbitrary: fc.record({
        event: fc.constantFrom('push', 'installation', 'ping', 'pull_request', 'issues', 'installation_repositories', '', 'x'.repeat(300)),
        payload: fc.oneof(mutated(pushPayload(400)), mutated({ action: 'created', installation: { id: 7, account: { login: 'acme' } } }), nastyJson),
        signed: fc.boolean(), delivery: fc.oneof(fc.uuid(), headerValue), hook: fc.option(headerValue, { nil: undefined }), contentType,
      }).map(({ event, payload, signed, delivery, hook, contentType: type }) => {
        const body = JSON.stringify(payload) ?? '';
        const extra: Record<string, string> = { 'x-github-event': event, 'x-github-delivery': delivery };
        if (signed) extra['x-hub-signature-256'] = `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex')}`;
        if (hook !== undefined) extra['x-github-hook-id'] = hook;
        return { method: 'POST', path: '/webhooks', query: '', credential: undefined, contentType: type, body, extra };
      }) },
      // Anywhere at all.
      { weight: 1, arbitrary: fc.record({
        method: fc.constantFrom(...HTTP_METHODS), path: fc.array(segment, { minLength: 1, maxLength: 5 }).map((parts) => `/${parts.join('/')}`), query,
        credential, contentType, body: fc.option(fc.string({ maxLength: 100 }), { nil: undefined }), extra: fc.constant({}),
      }) },
    );

    const bearer: Record<string, string | undefined> = {
      gateway: `Bearer ${token}`, admin: `Bearer ${adminToken}`, reader: `Bearer ${readerToken}`, hooks: `Bearer ${HOOKS_TOKEN}`,
      junk: `Bearer ${randomUUID()}`, 'revoked-shape': 'Bearer gwt_000000000000000000000000000000000000', basic: 'Basic Zm9vOmJhcg==', empty: 'Bearer ',
    };
    let count = 0;
    const seen = new Map<string, number>();
    await fc.assert(fc.asyncProperty(requestArb, async (input: any) => {
      const headers: Record<string, string> = { ...input.extra };
      if (headers['content-encoding']) delete headers['content-encoding'];
      if (input.credential && bearer[input.credential]) headers.authorization = bearer[input.credential]!;
      if (input.contentType !== undefined) headers['content-type'] = input.contentType;
      const path = `${input.path}${input.query}`;
      const body = input.body === undefined ? undefined : Buffer.from(input.body);
      const what = `${input.method} ${path} ${JSON.stringify(headers).slice(0, 300)} body ${body ? body.toString().slice(0, 300) : '(none)'}`;
      let answer: Answer;
      try {
        answer = await send(input.method, path, headers, body);
      } catch (error) {
        // Only a body past the limit may be cut off before it is read whole.
        if (body && body.length > BODY_LIMIT && /ECONNRESET|EPIPE|socket hang up/.test(String(error))) return;
        throw new Error(`no answer (${(error as Error).message}) to ${what}`);
      }
      count++;
      judge(input.method, path, answer, what);
      const found = operationOf(input.method, path);
      const key = `${found?.operation ? `${input.method} ${found.template}` : 'elsewhere'} ${answer.status}`;
      seen.set(key, (seen.get(key) ?? 0) + 1);
      if (count % 500 === 0) upstream.reset();
    }), { numRuns: RUNS.http, endOnFailure: true });

    expect(alive(), 'the daemon is up').to.equal(true);
    expect((await send('GET', '/healthz', {})).status).to.equal(200);
    // What the inputs reached, by operation and class of answer.
    const classes = new Map<string, Record<string, number>>();
    for (const [key, n] of seen) {
      const [operation, status] = [key.slice(0, key.lastIndexOf(' ')), key.slice(key.lastIndexOf(' ') + 1)];
      const entry = classes.get(operation) ?? {};
      entry[`${status[0]}xx`] = (entry[`${status[0]}xx`] ?? 0) + n;
      classes.set(operation, entry);
    }
    for (const [operation, entry] of [...classes].sort()) process.stdout.write(`      ${operation}: ${Object.entries(entry).map(([c, n]) => `${c} ${n}`).join(', ')}\n`);
    const [rssAfter, fdsAfter] = [rssMb(), openFds()];
    process.stdout.write(`      ${count} answers; daemon RSS ${rssBefore.toFixed(0)} → ${rssAfter.toFixed(0)} MB, open files ${fdsBefore} → ${fdsAfter}; ${mcp.toolCalls} MCP tool calls\n`);
    // The MCP server's tool still answers after whatever reached it.
    const echoed = await send('POST', '/tools/invoke', { 'content-type': 'application/json', authorization: `Bearer ${token}` }, JSON.stringify({ tool: 'mcp.fz.echo', args: { text: 'still here' } }));
    expect(JSON.parse(echoed.body.toString()).result?.content?.[0]?.text, echoed.body.toString()).to.equal('still here');
    // The first inference run loads the model SDK (~30 MB); past that, the daemon must not hold what it was sent.
    expect(rssAfter, 'memory stays bounded').to.be.below(Math.max(rssBefore, 90) + 200);
    expect(fdsAfter, 'no descriptor is left open').to.be.below(fdsBefore + 40);
  });

  it(`answers ${RUNS.raw} malformed HTTP messages with a 4xx or a closed connection, never a crash`, async () => {
    const line = fc.oneof(
      fc.constantFrom('GET / HTTP/1.1', 'GET /healthz HTTP/9.9', 'G\x00T / HTTP/1.1', 'GET  HTTP/1.1', 'POST /tokens HTTP/1.1', 'GET /%zz HTTP/1.1', 'GET http://x/ HTTP/1.1', '\r\n'),
      fc.string({ unit: 'binary-ascii', maxLength: 120 }),
    );
    const headerLines = fc.array(fc.oneof(
      fc.constantFrom('Host: x', 'Content-Length: -1', 'Content-Length: 99999999999', 'Content-Length: 5\r\nContent-Length: 6', 'Transfer-Encoding: chunked',
        'Transfer-Encoding: chunked, identity', `Authorization: Bearer ${'x'.repeat(20000)}`, 'Content-Type: application/json', 'X: \x7f', 'Upgrade: websocket'),
      fc.string({ unit: 'binary-ascii', maxLength: 80 }),
    ), { maxLength: 4 });
    await fc.assert(fc.asyncProperty(line, headerLines, fc.string({ unit: 'binary-ascii', maxLength: 200 }), async (first, lines, rest) => {
      const reply = await new Promise<string>((resolve) => {
        const socket = netConnect(port, '127.0.0.1');
        let received = '';
        socket.setTimeout(3000, () => socket.destroy());
        socket.on('data', (chunk) => { received += chunk.toString('latin1'); });
        socket.on('error', () => undefined);
        socket.on('close', () => resolve(received));
        socket.write(`${first}\r\n${lines.join('\r\n')}\r\n\r\n${rest}`, () => socket.end());
      });
      for (const [, status] of reply.matchAll(/HTTP\/1\.1 (\d{3})/g)) {
        if (Number(status) >= 500) throw new Error(`a server error for ${JSON.stringify(first)}: ${reply.slice(0, 300)}`);
      }
      for (const secret of secrets) if (reply.includes(secret)) throw new Error('a secret in the answer');
    }), { numRuns: RUNS.raw, endOnFailure: true });
    expect(alive()).to.equal(true);
    expect((await send('GET', '/healthz', {})).status).to.equal(200);
  });

  /** Every response frame: a known error code (never INTERNAL), a message, nothing secret. */
  function judgeFrame(frame: any, what: string): void {
    const text = JSON.stringify(frame);
    for (const secret of secrets) if (text.includes(secret)) throw new Error(`a secret in a frame: ${what}`);
    if (frame.type !== 'res') return;
    if (frame.ok === false && LEAK.test(text)) throw new Error(`a stack or a path in an error: ${what} → ${text.slice(0, 400)}`);
    if (typeof frame.id !== 'string' || typeof frame.ok !== 'boolean') throw new Error(`a malformed response frame: ${what} → ${text.slice(0, 400)}`);
    if (frame.ok) return;
    const { error } = frame;
    if (!error || !Object.hasOwn(ErrorCodes, error.code) || typeof error.message !== 'string' || error.message.length === 0) {
      throw new Error(`an error frame outside the protocol's shape: ${what} → ${text.slice(0, 400)}`);
    }
    if (error.code === 'INTERNAL') throw new Error(`INTERNAL: ${what} → ${text.slice(0, 400)}`);
  }

  it(`refuses ${RUNS.connect} generated handshakes and first frames with the protocol's errors`, async () => {
    const tamper = fc.array(fc.tuple(fc.constantFrom('minProtocol', 'maxProtocol', 'client', 'client.id', 'client.version', 'client.platform', 'client.mode', 'role', 'scopes',
      'auth', 'auth.token', 'auth.password', 'auth.deviceToken', 'auth.inviteCode', 'device', 'device.id', 'device.publicKey', 'device.signature', 'device.signedAt', 'device.nonce'), nastyJson, fc.boolean()), { maxLength: 3 });
    const first = fc.oneof(
      { weight: 3, arbitrary: fc.record({ tamper, credential: fc.constantFrom('token', 'junk', 'none', 'hooks') }) },
      { weight: 1, arbitrary: fc.record({ raw: fc.oneof(nastyJson.map((value) => JSON.stringify(value) ?? ''), fc.string({ maxLength: 200 }), fc.constant('{"type":"req","id":"x","method":"health"}')) }) },
    );
    await fc.assert(fc.asyncProperty(first, async (input: any) => {
      const socket = new RawSocket(`ws://127.0.0.1:${port}/`);
      try {
        if (input.raw !== undefined) {
          await socket.opened();
          await socket.next((frame) => frame.event === 'connect.challenge');
          socket.send(input.raw);
          await socket.closed;
          for (const frame of socket.frames) judgeFrame(frame, `first frame ${input.raw.slice(0, 200)}`);
          if (socket.closeCode !== 1008 && socket.closeCode !== 1009) throw new Error(`closed with ${socket.closeCode} after ${input.raw.slice(0, 200)}`);
          return;
        }
        const auth: Record<string, string> = { token: { token }, junk: { token: 'nope' }, none: {}, hooks: { token: HOOKS_TOKEN } }[input.credential as string]!;
        const answer = await socket.connect(auth, ['operator.read'], {
          tamper: (params) => {
            for (const [path, value, remove] of input.tamper as [string, unknown, boolean][]) {
              const keys = path.split('.');
              let parent = params;
              for (const key of keys.slice(0, -1)) parent = parent?.[key] && typeof parent[key] === 'object' ? parent[key] : undefined;
              if (!parent) continue;
              if (remove) delete parent[keys.at(-1)!];
              else parent[keys.at(-1)!] = value;
            }
          },
        });
        judgeFrame(answer, `connect ${JSON.stringify(input).slice(0, 300)}`);
        if (answer.ok) {
          const health = await socket.call('health');
          judgeFrame(health, 'health after connect');
        }
      } finally {
        socket.close();
      }
    }), { numRuns: RUNS.connect, endOnFailure: true });
    expect(alive()).to.equal(true);
  });

  it(`answers ${RUNS.rpc} generated requests of every method, and garbage, on a connected socket`, async () => {
    // Methods that end the daemon or change what the rest of the run stands on are left out.
    const excluded = new Set(['shutdown', 'restart', 'config.set', 'config.unset', 'secrets.changed', 'devices.rotate', 'devices.revoke', 'tokens.revoke', 'gateway.reload']);
    const methods = Object.entries(METHODS).filter(([name]) => !excluded.has(name));
    const hints: Hints = {
      channel: fc.constantFrom('irc', 'slack', 'x'), id: fc.constantFrom('job_x', 'tok_x', 'x'), key: fc.constantFrom('gateway.port', 'hooks', 'nope', 'models.providers'),
      tool: fc.constantFrom(...toolNames, 'nope'), agent: fc.constantFrom('main', 'nope'), sessionKey: fc.constantFrom('hook:a', 'irc:default:dm:x', 'x'),
      kind: fc.constantFrom('store.prune', 'gmail.push', 'nope'), code: fc.constantFrom('ABCD1234', 'x'),
    };
    const request = fc.oneof(
      { weight: 8, arbitrary: fc.oneof(...methods.map(([name, method]) => fromSchema(method.params as object, {}, hints).map((params) => ({ method: name, params })))) },
      { weight: 1, arbitrary: fc.record({ method: fc.oneof(nastyString, fc.constantFrom('connect', 'constructor', '__proto__', 'health ')), params: nastyJson }) },
      { weight: 1, arbitrary: fc.record({ garbage: fc.oneof(nastyJson.map((value) => JSON.stringify(value) ?? ''), fc.string({ maxLength: 100 }), fc.constant('{"type":"res","id":"x","ok":true}')) }) },
    );
    let socket: RawSocket | undefined;
    const connected = async () => {
      if (socket && socket.closeCode === undefined) return socket;
      socket = new RawSocket(`ws://127.0.0.1:${port}/`);
      const hello = await socket.connect({ token }, ['operator.admin'], { device: newDevice() });
      expect(hello.ok, JSON.stringify(hello)).to.equal(true);
      return socket;
    };
    let n = 0;
    await fc.assert(fc.asyncProperty(request, async (input: any) => {
      const open = await connected();
      const id = `f${++n}`;
      if (input.garbage !== undefined) {
        open.send(input.garbage);
        const health = await open.call('health');
        judgeFrame(health, 'health after garbage');
      } else {
        open.send({ type: 'req', id, method: input.method, params: input.params });
        // A frame the gateway cannot read (nested too deep) is answered without its id.
        const answer = await open.next((frame) => frame.type === 'res' && (frame.id === id || frame.id === ''), 30_000);
        judgeFrame(answer, `${input.method} ${JSON.stringify(input.params)?.slice(0, 300)}`);
      }
      for (const frame of open.frames.splice(0)) judgeFrame(frame, `unasked frame after ${JSON.stringify(input).slice(0, 200)}`);
    }), { numRuns: RUNS.rpc, endOnFailure: true });
    socket?.close();
    expect(alive()).to.equal(true);
    expect((await send('GET', '/healthz', {})).status).to.equal(200);
  });
});

/** A string as a URL component; lone surrogates, which cannot be encoded, become U+FFFD. */
const encode = (text: string) => encodeURIComponent(text.replace(/\p{Cs}/gu, '\uFFFD'));
