import { expect } from 'chai';
import AjvModule from 'ajv';
import formatsModule from 'ajv-formats';
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { freePort, Home } from '../support/cli.ts';
import { deliver, pushPayload, TEST_WEBHOOK_SECRET } from '../support/webhooks.ts';

const Ajv = AjvModule.default;
const addFormats = formatsModule.default;

describe('API contract: every route answers as /openapi.json says (e2e)', function () {
  let home: Home;
  let base: string;
  let token: string;
  let document: any;
  let ajv: InstanceType<typeof Ajv>;

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    expect((await home.run(['start'])).code).to.equal(0);
    token = home.token();
    const response = await fetch(`${base}/openapi.json`);
    expect(response.status).to.equal(200);
    document = await response.json();
    ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    for (const [name, schema] of Object.entries(document.components.schemas)) ajv.addSchema(schema as object, `#/components/schemas/${name}`);
  });
  after(() => home.cleanup());

  /** Asserts the answer is documented for the operation and its body matches the documented schema. */
  async function conforms(method: string, template: string, response: Response): Promise<void> {
    const operation = document.paths[template]?.[method.toLowerCase()];
    expect(operation, `${method} ${template} is documented`).to.be.an('object');
    const documented = operation.responses[String(response.status)];
    expect(documented, `${method} ${template} documents ${response.status}`).to.be.an('object');
    const schema = documented.content?.['application/json']?.schema;
    if (!schema || response.status === 204) return;
    const body = await response.json();
    const validate = ajv.compile(schema);
    expect(validate(body), `${method} ${template} ${response.status}: ${JSON.stringify(validate.errors)} for ${JSON.stringify(body).slice(0, 300)}`).to.equal(true);
  }

  const auth = (value = token) => ({ authorization: `Bearer ${value}` });
  const jsonBody = (value: unknown) => ({ method: 'POST', headers: { ...auth(), 'content-type': 'application/json' }, body: JSON.stringify(value) });

  it('is an OpenAPI 3.1 document listing the API', () => {
    expect(document.openapi).to.equal('3.1.0');
    expect(Object.keys(document.paths)).to.include.members(['/webhooks', '/tokens', '/tokens/{id}', '/jobs', '/jobs/{id}', '/healthz', '/readyz']);
    expect(document.paths['/jobs'].get['x-required-scope']).to.equal('jobs:read');
  });

  it('probes', async () => {
    await conforms('GET', '/healthz', await fetch(`${base}/healthz`));
    await conforms('GET', '/readyz', await fetch(`${base}/readyz`));
  });

  it('tokens', async () => {
    const created = await fetch(`${base}/tokens`, jsonBody({ name: 'contract', scopes: ['tokens:read', 'tokens:write', 'jobs:read'] }));
    const body = await created.clone().json() as { id: string; token: string };
    await conforms('POST', '/tokens', created);
    await conforms('POST', '/tokens', await fetch(`${base}/tokens`, jsonBody({ name: '', scopes: [] })));
    await conforms('POST', '/tokens', await fetch(`${base}/tokens`, { method: 'POST', headers: { ...auth(), 'content-type': 'text/plain' }, body: 'x' }));
    await conforms('POST', '/tokens', await fetch(`${base}/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }));
    await conforms('GET', '/tokens', await fetch(`${base}/tokens`, { headers: auth() }));
    await conforms('GET', '/tokens', await fetch(`${base}/tokens`, { headers: auth('gwt_000000000000000000000000000000000000') }));
    const reader = await (await fetch(`${base}/tokens`, jsonBody({ name: 'reader', scopes: ['jobs:read'] }))).json() as { token: string };
    await conforms('GET', '/tokens', await fetch(`${base}/tokens`, { headers: auth(reader.token) }));
    await conforms('DELETE', '/tokens/{id}', await fetch(`${base}/tokens/${body.id}`, { method: 'DELETE', headers: auth() }));
    await conforms('DELETE', '/tokens/{id}', await fetch(`${base}/tokens/tok_missing`, { method: 'DELETE', headers: auth() }));
  });

  it('webhooks and jobs', async () => {
    await conforms('POST', '/webhooks', (await rawDeliver('push', JSON.stringify(pushPayload()))));
    await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: TEST_WEBHOOK_SECRET });
    const accepted = await rawDeliver('push', JSON.stringify(pushPayload()));
    const { jobId } = await accepted.clone().json() as { jobId: string };
    await conforms('POST', '/webhooks', accepted);
    await conforms('POST', '/webhooks', await rawDeliver('push', '{"ref":1}'));
    await conforms('POST', '/webhooks', await fetch(`${base}/webhooks`, { method: 'POST', headers: { 'content-type': 'text/xml' }, body: '<x/>' }));
    expect((await deliver(base, 'ping', '{}')).status).to.equal(200);

    await conforms('GET', '/jobs', await fetch(`${base}/jobs?limit=1`, { headers: auth() }));
    await conforms('GET', '/jobs', await fetch(`${base}/jobs?limit=0`, { headers: auth() }));
    await conforms('GET', '/jobs', await fetch(`${base}/jobs`));
    await conforms('GET', '/jobs/{id}', await fetch(`${base}/jobs/${jobId}`, { headers: auth() }));
    await conforms('GET', '/jobs/{id}', await fetch(`${base}/jobs/job_missing`, { headers: auth() }));
  });

  it('tools', async () => {
    await conforms('POST', '/tools/invoke', await fetch(`${base}/tools/invoke`, jsonBody({ tool: 'gateway.status' })));
    await conforms('POST', '/tools/invoke', await fetch(`${base}/tools/invoke`, jsonBody({ tool: 'jobs.get', args: {} })));
    await conforms('POST', '/tools/invoke', await fetch(`${base}/tools/invoke`, jsonBody({ tool: 'nope' })));
    await conforms('POST', '/tools/invoke', await fetch(`${base}/tools/invoke`, jsonBody({ tool: 'gateway.reload' })));
    await conforms('POST', '/tools/invoke', await fetch(`${base}/tools/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }));
    const reader = JSON.parse((await home.run(['tokens', 'create', '--name', 'r', '--scope', 'jobs:read', '--json'])).stdout).token;
    await conforms('POST', '/tools/invoke', await fetch(`${base}/tools/invoke`, { ...jsonBody({ tool: 'gateway.status' }), headers: { ...auth(reader), 'content-type': 'application/json' } }));
  });

  it('wrong methods: 405 with Allow in each route\'s own error body, documented; 415 where a route takes JSON', async () => {
    const cases: [string, string, string, string][] = [
      ['DELETE', '/jobs', '/jobs', 'GET'], ['PUT', '/tokens', '/tokens', 'GET, POST'], ['POST', '/openapi.json', '/openapi.json', 'GET'],
      ['GET', '/tools/invoke', '/tools/invoke', 'POST'], ['TRACE', '/jobs/job_x', '/jobs/{id}', 'GET'], ['PROPFIND', '/tokens', '/tokens', 'GET, POST'],
    ];
    for (const [method, path, template, allow] of cases) {
      const response = await anyMethod(method, path);
      expect(response.status, `${method} ${path}`).to.equal(405);
      expect(response.headers.get('allow'), `${method} ${path}`).to.equal(allow);
      const body = await response.clone().json() as Record<string, unknown>;
      if (path === '/tools/invoke') expect(body).to.include({ ok: false });
      const documented = allow.split(', ')[0]!;
      await conforms(documented, template, response);
    }
    await conforms('POST', '/tools/invoke', await fetch(`${base}/tools/invoke`, { method: 'POST', headers: { ...auth(), 'content-type': 'text/plain' }, body: 'x' }));
  });

  /** A request with any method (fetch refuses some, such as TRACE), as a Response. */
  function anyMethod(method: string, path: string): Promise<Response> {
    return new Promise((resolve, reject) => {
      const request = httpRequest(`${base}${path}`, { method, headers: auth() }, (incoming) => {
        const chunks: Buffer[] = [];
        incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
        incoming.on('end', () => resolve(new Response(Buffer.concat(chunks), {
          status: incoming.statusCode, headers: Object.entries(incoming.headers).map(([name, value]) => [name, String(value)] as [string, string]),
        })));
      });
      request.on('error', reject);
      request.end();
    });
  }

  async function rawDeliver(event: string, body: string): Promise<Response> {
    const { sign } = await import('@octokit/webhooks-methods');
    return fetch(`${base}/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-github-event': event, 'x-github-delivery': randomUUID(), 'x-hub-signature-256': await sign(TEST_WEBHOOK_SECRET, body) },
      body,
    });
  }
});
