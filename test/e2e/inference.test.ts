import { expect } from 'chai';
import OpenAI from 'openai';
import AjvModule from 'ajv';
import formatsModule from 'ajv-formats';
import { DatabaseSync } from 'node:sqlite';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { startModelServer, type ModelServer } from '../support/model-server.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

const Ajv = AjvModule.default;
const addFormats = formatsModule.default;

describe('inference API with the official openai client, a real model and a scripted one (e2e)', function () {
  let model: ModelServer;
  let script: ScriptedUpstream;
  let home: Home;
  let port: number;
  let base: string;
  let openai: OpenAI;

  const config = (key: string, value: unknown) => home.run(['config', 'set', key, JSON.stringify(value)]).then((result) => expect(result.code, result.stderr).to.equal(0));
  const direct = async (body: Record<string, unknown>) => (await fetch(`${model.url}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'stories', ...body }) })).json() as Promise<any>;
  const client = (apiKey: string) => new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0 });
  const failure = (work: Promise<unknown>) => work.then(() => expect.fail('expected an error'), (error: any) => error);

  before(async () => {
    [model, script] = await Promise.all([startModelServer(), new ScriptedUpstream().start()]);
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    await config('models', {
      providers: {
        local: { kind: 'openai-compatible', baseUrl: model.url, models: ['stories'], embeddingModels: ['stories'] },
        script: { kind: 'openai-compatible', baseUrl: script.url, models: ['m'], timeouts: { totalMs: 10_000, firstTokenMs: 5000, stallMs: 5000 }, retries: { max: 0 } },
      },
    });
    await config('agents', {
      main: { model: 'local/stories', maxOutputTokens: 16 },
      tooly: { model: 'script/m', clientTools: true, tools: ['jobs.get'] },
    });
    await config('gateway.http.endpoints', { chatCompletions: { enabled: true }, responses: { enabled: true }, embeddings: { enabled: true }, models: { enabled: false } });
    expect((await home.run(['start'])).code).to.equal(0);
    openai = client(home.token());
  });
  after(async () => {
    home?.cleanup();
    model?.stop();
    await script?.stop();
  });
  beforeEach(() => script.reset());

  it('chat completions, whole and streamed: the real model\'s text and token counts, usage last before [DONE]', async () => {
    const expected = await direct({ messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 16 });
    const whole = await openai.chat.completions.create({ model: 'gateway', messages: [{ role: 'user', content: 'Once upon a time' }] });
    expect(whole.choices[0]!.message.content).to.equal(expected.choices[0].message.content);
    expect(whole.choices[0]!.finish_reason).to.equal(expected.choices[0].finish_reason);
    expect(whole.usage).to.deep.equal(expected.usage);

    const stream = await openai.chat.completions.create({ model: 'gateway/main', messages: [{ role: 'user', content: 'Once upon a time' }], stream: true, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join('')).to.equal(expected.choices[0].message.content);
    const last = chunks.at(-1)!;
    expect(last.choices).to.deep.equal([]);
    expect(last.usage).to.deep.equal(expected.usage);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).to.equal(expected.choices[0].finish_reason);
    expect(chunks[0]!.choices[0]!.delta.role).to.equal('assistant');
  });

  it('keeps a user\'s exchanges in one session, and a request without one in a fresh session', async () => {
    await openai.chat.completions.create({ model: 'gateway', messages: [{ role: 'user', content: 'Once upon a time' }], user: 'ada' });
    await openai.chat.completions.create({ model: 'gateway', messages: [{ role: 'user', content: 'The dog' }], user: 'ada' });
    const sessions = JSON.parse((await home.run(['sessions', 'list', '--json'])).stdout).sessions;
    const ada = sessions.find((session: any) => session.key === 'api:main:dm:gateway/ada');
    expect(ada.messageCount).to.equal(4);
    const shown = await home.run(['sessions', 'show', ada.key]);
    expect(shown.stdout).to.include('The dog').and.to.include('(local/stories, 3 in / 16 out');
  });

  it('responses, whole and streamed, and previous_response_id across a daemon restart', async () => {
    const first = await openai.responses.create({ model: 'gateway', input: 'Once upon a time' });
    const expected = await direct({ messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 16 });
    expect(first.output_text).to.equal(expected.choices[0].message.content);
    expect(first.usage).to.include({ input_tokens: expected.usage.prompt_tokens, output_tokens: expected.usage.completion_tokens });
    expect((await openai.responses.retrieve(first.id)).id).to.equal(first.id);

    const stream = await openai.responses.create({ model: 'gateway', input: 'The cat', previous_response_id: first.id, stream: true });
    const types: string[] = [];
    let completed: any;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.completed') completed = event.response;
    }
    expect(types[0]).to.equal('response.created');
    expect(types.at(-1)).to.equal('response.completed');
    expect(types).to.include.members(['response.output_item.added', 'response.output_text.delta', 'response.output_text.done', 'response.output_item.done']);
    expect(completed.previous_response_id).to.equal(first.id);

    expect((await home.run(['restart'])).code).to.equal(0);
    const after = await openai.responses.create({ model: 'gateway', input: 'The end', previous_response_id: completed.id });
    expect(after.previous_response_id).to.equal(completed.id);
    expect(after.status).to.equal('completed');
    const missing = await failure(openai.responses.create({ model: 'gateway', input: 'x', previous_response_id: 'resp_doesnotexist' }));
    expect(missing.status).to.equal(404);
    expect(missing.error).to.include({ code: 'previous_response_not_found', param: 'previous_response_id', type: 'invalid_request_error' });
  });

  it('a stored response is continued only by the person it was for: another user of the same credential gets 404', async () => {
    const alices = await openai.responses.create({ model: 'gateway', input: 'My locker code is 4471', user: 'alice' });
    const bobs = await failure(openai.responses.create({ model: 'gateway', input: 'What is the locker code?', previous_response_id: alices.id, user: 'bob' }));
    expect(bobs.status).to.equal(404);
    expect(bobs.error).to.include({ code: 'previous_response_not_found' });
    const anonymous = await failure(openai.responses.create({ model: 'gateway', input: 'And now?', previous_response_id: alices.id }));
    expect(anonymous.status, 'the credential without a user is not alice either').to.equal(404);
    const again = await openai.responses.create({ model: 'gateway', input: 'Thanks', previous_response_id: alices.id, user: 'alice' });
    expect(again.previous_response_id).to.equal(alices.id);
  });

  it('lists agents and offered models, and answers embeddings as the model gives them, float or base64', async () => {
    const listed = (await openai.models.list()).data.map((entry) => entry.id);
    expect(listed).to.include.members(['gateway', 'gateway/main', 'gateway/tooly', 'local/stories', 'script/m']);
    const direct = await (await fetch(`${model.url}/embeddings`, { method: 'POST', body: JSON.stringify({ model: 'stories', input: ['hello', 'world'] }) })).json() as any;
    const viaSdk = await openai.embeddings.create({ model: 'local/stories', input: ['hello', 'world'] });
    expect(viaSdk.data.map((entry) => entry.embedding.length)).to.deep.equal([64, 64]);
    viaSdk.data[0]!.embedding.forEach((value, index) => expect(value).to.be.closeTo(direct.data[0].embedding[index], 1e-5));
    expect(viaSdk.usage).to.deep.equal(direct.usage);
    const floats = await openai.embeddings.create({ model: 'local/stories', input: 'hello', encoding_format: 'float' });
    expect(floats.data[0]!.embedding[0]).to.be.closeTo(direct.data[0].embedding[0], 1e-5);
    const notEmbedding = await failure(openai.embeddings.create({ model: 'script/m', input: 'x' }));
    expect(notEmbedding.status).to.equal(404);
  });

  it('passes client tools to the model and returns its calls to the client; refuses them where the agent does not allow', async () => {
    script.enqueue(openaiToolCalls([{ name: 'lookup_weather', args: { city: 'Oslo' }, id: 'call_w' }]), openaiText('It is cold in Oslo.'));
    const tools = [{ type: 'function' as const, function: { name: 'lookup_weather', description: 'weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
    const asked = await openai.chat.completions.create({ model: 'gateway/tooly', messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools });
    expect(asked.choices[0]!.finish_reason).to.equal('tool_calls');
    const call = asked.choices[0]!.message.tool_calls![0]!;
    expect(call).to.deep.include({ id: 'call_w', type: 'function' });
    expect(JSON.parse((call as any).function.arguments)).to.deep.equal({ city: 'Oslo' });
    expect(script.requests[0]!.body.tools.map((tool: any) => tool.function.name)).to.include.members(['lookup_weather', 'jobs_get']);
    const answered = await openai.chat.completions.create({
      model: 'gateway/tooly', tools,
      messages: [{ role: 'user', content: 'Weather in Oslo?' }, asked.choices[0]!.message, { role: 'tool', tool_call_id: 'call_w', content: '{"celsius": -3}' }],
    });
    expect(answered.choices[0]!.message.content).to.equal('It is cold in Oslo.');
    expect(script.requests[1]!.body.messages.at(-1)).to.include({ role: 'tool', tool_call_id: 'call_w' });
    const refused = await failure(openai.chat.completions.create({ model: 'gateway/main', messages: [{ role: 'user', content: 'x' }], tools }));
    expect(refused.status).to.equal(400);
    expect(refused.error).to.include({ param: 'tools', code: 'unsupported_parameter' });
  });

  it('shows the agent\'s own tool calls only to a client that asks', async () => {
    script.enqueue(openaiToolCalls([{ name: 'jobs_get', args: { id: 'job_none' } }]), openaiText('No such job.'));
    const hidden = await openai.chat.completions.create({ model: 'gateway/tooly', messages: [{ role: 'user', content: 'job?' }] });
    expect(hidden.choices[0]!.message).to.not.have.property('gateway_tool_calls');
    script.enqueue(openaiToolCalls([{ name: 'jobs_get', args: { id: 'job_none' } }]), openaiText('No such job.'));
    const shown = await openai.chat.completions.create({ model: 'gateway/tooly', messages: [{ role: 'user', content: 'job?' }] }, { headers: { 'x-gateway-tool-calls': 'show' } });
    expect((shown.choices[0]!.message as any).gateway_tool_calls).to.deep.equal([{ name: 'jobs.get', args: { id: 'job_none' }, error: 'No job job_none.' }]);
  });

  it('answers bad input in the convention the client parses: 401, 400 naming the field, 404, 413, and 429 with Retry-After', async () => {
    const denied = await failure(client('wrong').chat.completions.create({ model: 'gateway', messages: [{ role: 'user', content: 'x' }] }));
    expect(denied.status).to.equal(401);
    expect(denied.error.type).to.equal('authentication_error');
    const unknownModel = await failure(openai.chat.completions.create({ model: 'gateway/nobody', messages: [{ role: 'user', content: 'x' }] }));
    expect(unknownModel.status).to.equal(404);
    expect(unknownModel.error).to.include({ code: 'model_not_found', param: 'model' });
    // Names that are keys of every object, not of the configuration, name nothing either.
    for (const model of ['valueOf', 'gateway/constructor', 'constructor/x', '__proto__/m']) {
      const inherited = await failure(openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] }));
      expect(inherited.status, model).to.equal(404);
      expect(inherited.error, model).to.include({ code: 'model_not_found' });
      const embedded = await failure(openai.embeddings.create({ model, input: 'x' }));
      expect(embedded.status, model).to.equal(404);
    }
    const several = await failure(openai.chat.completions.create({ model: 'gateway', messages: [{ role: 'user', content: 'x' }], n: 2 }));
    expect(several.status).to.equal(400);
    expect(several.error).to.include({ param: 'n' });
    const unsupported = await failure(openai.chat.completions.create({ model: 'gateway', messages: [{ role: 'user', content: 'x' }], logit_bias: { 1: 1 } }));
    expect(unsupported.error).to.include({ param: 'logit_bias', code: 'unsupported_parameter' });
    for (const [body, param] of [['{"model":"gateway"}', 'messages'], ['{"model":7,"messages":[]}', 'model'], ['{"model":"gateway","messages":[{"role":"robot","content":"x"}]}', 'messages[0].role']] as const) {
      const raw = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${home.token()}`, 'content-type': 'application/json' }, body });
      expect(raw.status).to.equal(400);
      expect(((await raw.json()) as any).error.param).to.equal(param);
    }
    const notJson = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${home.token()}`, 'content-type': 'application/json' }, body: '{nope' });
    expect(notJson.status).to.equal(400);
    expect(((await notJson.json()) as any).error.type).to.equal('invalid_request_error');
    const huge = await failure(openai.chat.completions.create({ model: 'gateway', messages: [{ role: 'user', content: 'x'.repeat(5 * 1024 * 1024) }] }));
    expect(huge.status).to.equal(413);
    const wrongMethod = await fetch(`${base}/v1/chat/completions`, { headers: { authorization: `Bearer ${home.token()}` } });
    expect(wrongMethod.status).to.equal(405);
    expect(wrongMethod.headers.get('allow')).to.equal('POST');
    expect(((await wrongMethod.json()) as any).error).to.be.an('object');

    const token = JSON.parse((await home.run(['tokens', 'create', '--name', 'infer', '--scope', 'inference', '--json'])).stdout).token;
    const jobsOnly = JSON.parse((await home.run(['tokens', 'create', '--name', 'jobs', '--scope', 'jobs:read', '--json'])).stdout).token;
    expect((await failure(client(jobsOnly).models.list())).status).to.equal(403);
    await config('inference.limits.requestsPerMinute', 2);
    const limited = client(token);
    await limited.models.list();
    await limited.models.list();
    const over = await failure(limited.models.list());
    expect(over.status).to.equal(429);
    expect(over.error).to.include({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
    expect(Number(over.headers.get('retry-after'))).to.be.within(1, 60);
    expect((await openai.models.list()).data.length, 'the gateway credential is not metered').to.be.greaterThan(0);
    await config('inference.limits.requestsPerMinute', 120);
    // The monthly budget counts what the providers reported, from the log of model calls.
    const budgeted = client(JSON.parse((await home.run(['tokens', 'create', '--name', 'budget', '--scope', 'inference', '--json'])).stdout).token);
    await config('inference.limits.monthlyTokens', 10);
    await budgeted.chat.completions.create({ model: 'gateway', messages: [{ role: 'user', content: 'Once upon a time' }] });
    const spent = await failure(budgeted.chat.completions.create({ model: 'gateway', messages: [{ role: 'user', content: 'Once upon a time' }] }));
    expect(spent.status).to.equal(429);
    expect(spent.error).to.include({ code: 'insufficient_quota' });
    await home.run(['config', 'unset', 'inference.limits.monthlyTokens']);
  });

  it('aborts the run of a client that goes away mid-stream, leaves nothing running, and keeps idle streams alive', async () => {
    await config('inference.keepaliveMs', 1000);
    script.enqueue(openaiText('a slow answer in many pieces', undefined, { pieces: 20, gapMs: 400 }));
    const controller = new AbortController();
    const response = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST', signal: controller.signal, headers: { authorization: `Bearer ${home.token()}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gateway/tooly', messages: [{ role: 'user', content: 'tell me' }], stream: true }),
    });
    const reader = response.body!.getReader();
    await reader.read();
    controller.abort();
    const runs = () => {
      const db = new DatabaseSync(home.file('state.db'), { readOnly: true });
      try {
        return db.prepare("SELECT status FROM agent_runs WHERE agent = 'tooly'").all().map((row: any) => row.status);
      } finally {
        db.close();
      }
    };
    await waitFor(() => runs().includes('aborted'), 10_000, 'the run to be aborted');
    expect(runs()).to.not.include('running');

    script.enqueue({ sse: openaiText('late').sse, delayMs: 2500 });
    const idle = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${home.token()}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gateway/tooly', messages: [{ role: 'user', content: 'wait' }], stream: true }),
    });
    const text = await idle.text();
    expect(text).to.match(/^: keepalive$/m);
    expect(text).to.include('data: [DONE]');
    await config('inference.keepaliveMs', 15_000);
    expect((await fetch(`${base}/healthz`)).status).to.equal(200);
  });

  it('names the provider when it is down (502), and is off by default', async () => {
    await script.stop();
    const down = await failure(openai.chat.completions.create({ model: 'gateway/tooly', messages: [{ role: 'user', content: 'x' }] }));
    expect(down.status).to.equal(502);
    expect(down.error.message).to.match(/Provider script/);
    script = await new ScriptedUpstream().start();
    await config('models.providers.script.baseUrl', script.url);

    const fresh = new Home({ GATEWAY_PORT: String(await freePort()) });
    try {
      expect((await fresh.run(['start'])).code).to.equal(0);
      const off = await fetch(`http://127.0.0.1:${fresh.env.GATEWAY_PORT}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${fresh.token()}`, 'content-type': 'application/json' }, body: '{}' });
      expect(off.status).to.equal(404);
      expect(((await off.json()) as any).error.message).to.include('gateway.http.endpoints.chatCompletions.enabled');
    } finally {
      fresh.cleanup();
    }
  });

  it('documents every inference route in /openapi.json, and answers as documented', async () => {
    const document = await (await fetch(`${base}/openapi.json`)).json() as any;
    const ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    for (const [name, schema] of Object.entries(document.components.schemas)) ajv.addSchema(schema as object, `#/components/schemas/${name}`);
    const conforms = async (method: string, template: string, response: Response) => {
      const documented = document.paths[template]?.[method.toLowerCase()]?.responses?.[String(response.status)];
      expect(documented, `${method} ${template} documents ${response.status}`).to.be.an('object');
      const schema = documented.content?.['application/json']?.schema;
      if (!schema) return;
      const body = await response.json();
      const validate = ajv.compile(schema);
      expect(validate(body), `${template} ${response.status}: ${JSON.stringify(validate.errors)}`).to.equal(true);
    };
    const post = (path: string, body: unknown, token = home.token()) => fetch(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    await conforms('POST', '/v1/chat/completions', await post('/v1/chat/completions', { model: 'gateway', messages: [{ role: 'user', content: 'Once' }] }));
    await conforms('POST', '/v1/chat/completions', await post('/v1/chat/completions', { model: 'gateway', messages: [] }));
    await conforms('POST', '/v1/chat/completions', await post('/v1/chat/completions', { model: 'nope', messages: [{ role: 'user', content: 'x' }] }));
    await conforms('POST', '/v1/chat/completions', await post('/v1/chat/completions', {}, 'wrong'));
    const response = await post('/v1/responses', { model: 'gateway', input: 'Once' });
    const { id } = await response.clone().json() as { id: string };
    await conforms('POST', '/v1/responses', response);
    await conforms('GET', '/v1/responses/{id}', await fetch(`${base}/v1/responses/${id}`, { headers: { authorization: `Bearer ${home.token()}` } }));
    await conforms('GET', '/v1/responses/{id}', await fetch(`${base}/v1/responses/resp_missing`, { headers: { authorization: `Bearer ${home.token()}` } }));
    await conforms('GET', '/v1/models', await fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${home.token()}` } }));
    await conforms('POST', '/v1/embeddings', await post('/v1/embeddings', { model: 'local/stories', input: 'hi' }));
    await conforms('POST', '/v1/embeddings', await post('/v1/embeddings', { model: 'local/stories', input: [] }));
    await sleep(10);
  });
});
