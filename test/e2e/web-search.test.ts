import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { freePort, Home } from '../support/cli.ts';

const TOKEN = 'web-search-gateway-token-for-tests';
const BRAVE_KEY = 'BSA-brave-key-for-tests-0123456789';
const TAVILY_KEY = 'tvly-tavily-key-for-tests-0123456789';

interface Seen { method: string; path: string; query: URLSearchParams; headers: IncomingMessage['headers']; body: string }

/**
 * Stand-ins of the three providers, written from their API references: SearXNG's
 * JSON format (`GET /search?q&format=json` -> {results: [{title, url, content}]}),
 * the Brave Search API (`GET /res/v1/web/search?q&count`, X-Subscription-Token,
 * {web: {results: [{title, url, description}]}}, errors {type: "ErrorResponse",
 * error: {code, detail}}, X-RateLimit-* headers) and Tavily (`POST /search`,
 * bearer key, {query, max_results} -> {results: [{title, url, content}]},
 * errors {detail: {error}}, 432 and 433 for plan limits).
 */
function standIn(answer: (seen: Seen) => { status: number; headers?: Record<string, string>; body: unknown } | undefined, seen: Seen[]): Server {
  return createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url!, 'http://stand-in');
      const entry = { method: req.method!, path: url.pathname, query: url.searchParams, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      seen.push(entry);
      const reply = answer(entry);
      if (!reply) return; // never answers
      res.writeHead(reply.status, { 'content-type': typeof reply.body === 'string' ? 'text/html' : 'application/json', ...reply.headers });
      res.end(typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body));
    });
  });
}

describe('web.search against SearXNG, Brave and Tavily stand-ins (e2e)', function () {
  this.timeout(60_000);
  let home: Home;
  let base: string;
  const servers: Server[] = [];
  const seen: Seen[] = [];
  let searxngUrl: string;
  let braveUrl: string;
  let tavilyUrl: string;
  let searxngJson = true;
  let braveMode: 'ok' | 'limited' | 'hang' = 'ok';
  let tavilyMode: 'ok' | 'limited' | 'plan' = 'ok';

  const invoke = async (tool: string, args: Record<string, unknown>) => {
    const response = await fetch(`${base}/tools/invoke`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ tool, args }) });
    return { status: response.status, headers: response.headers, body: await response.json() as any };
  };
  const listen = async (server: Server) => {
    const port = await freePort();
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    servers.push(server);
    return `http://127.0.0.1:${port}`;
  };

  before(async () => {
    searxngUrl = await listen(standIn((request) => {
      if (request.path !== '/searx/search') return { status: 404, body: 'no such page' };
      if (!searxngJson || request.query.get('format') !== 'json') return { status: 403, body: '<html><body><h1>403 Forbidden</h1></body></html>' };
      return {
        status: 200,
        body: {
          query: request.query.get('q'), number_of_results: 3,
          results: [
            { title: 'Gateway <strong>release</strong> notes', url: 'https://example.org/releases', content: 'What changed in <strong>2.1</strong> &amp; before', engine: 'duckduckgo' },
            { title: 'Not a page', url: 'javascript:alert(1)', content: 'dropped' },
            { title: 'Second', url: 'https://example.net/second', content: 'another one' },
          ],
          answers: [], suggestions: [],
        },
      };
    }, seen));
    braveUrl = await listen(standIn((request) => {
      if (request.path !== '/res/v1/web/search') return { status: 404, body: { type: 'ErrorResponse', error: { code: 'NOT_FOUND', detail: 'no such endpoint' } } };
      if (request.headers['x-subscription-token'] !== BRAVE_KEY) {
        return { status: 401, body: { type: 'ErrorResponse', error: { id: 'e1', status: 401, code: 'SUBSCRIPTION_TOKEN_INVALID', detail: 'The provided subscription token is invalid.' } } };
      }
      if (braveMode === 'hang') return undefined;
      if (braveMode === 'limited') {
        return {
          status: 429, headers: { 'x-ratelimit-limit': '1, 2000', 'x-ratelimit-remaining': '0, 1500', 'x-ratelimit-reset': '7, 1419704' },
          body: { type: 'ErrorResponse', error: { id: 'e2', status: 429, code: 'RATE_LIMITED', detail: 'Request rate limit exceeded for plan.' } },
        };
      }
      const count = Number(request.query.get('count'));
      return {
        status: 200,
        body: {
          type: 'search', query: { original: request.query.get('q') },
          web: { type: 'search', results: Array.from({ length: 10 }, (_, i) => ({ title: `Brave result ${i + 1}`, url: `https://brave.example/${i + 1}`, description: `About <strong>${request.query.get('q')}</strong> ${i + 1}` })).slice(0, count) },
        },
      };
    }, seen));
    tavilyUrl = await listen(standIn((request) => {
      if (request.method !== 'POST' || request.path !== '/search') return { status: 404, body: { detail: 'Not Found' } };
      if (request.headers.authorization !== `Bearer ${TAVILY_KEY}`) return { status: 401, body: { detail: { error: 'Unauthorized: missing or invalid API key.' } } };
      if (tavilyMode === 'limited') return { status: 429, headers: { 'retry-after': '12' }, body: { detail: { error: 'Your request has been blocked due to excessive requests. Please reduce rate of requests.' } } };
      if (tavilyMode === 'plan') return { status: 432, body: { detail: { error: 'This request exceeds your plan\'s set usage limit. Please upgrade your plan or contact support@tavily.com' } } };
      const body = JSON.parse(request.body);
      return {
        status: 200,
        body: {
          query: body.query, answer: null, images: [], response_time: 0.5,
          results: Array.from({ length: body.max_results }, (_, i) => ({ title: `Tavily ${i + 1}`, url: `https://tavily.example/${i + 1}`, content: `Snippet ${i + 1}`, score: 0.9 - i / 10, raw_content: null })),
        },
      };
    }, seen));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port), GATEWAY_TOKEN: TOKEN });
    expect((await home.run(['start'])).code).to.equal(0);
  });
  after(() => {
    home.cleanup();
    for (const server of servers) {
      server.closeAllConnections();
      server.close();
    }
  });
  beforeEach(() => {
    seen.length = 0;
  });

  it('without a provider, web.search answers 503 naming the settings; bad args are 400', async () => {
    const none = await invoke('web.search', { query: 'gateway' });
    expect(none.status).to.equal(503);
    expect(none.body.message).to.include('gateway config set tools.web.search.provider');
    for (const args of [{}, { query: '' }, { query: 'x', count: 0 }, { query: 'x', count: 21 }, { query: 'x', extra: true }, { query: 'x'.repeat(401) }]) {
      expect((await invoke('web.search', args)).status, JSON.stringify(args).slice(0, 40)).to.equal(400);
    }
    // Denied like any tool: gone everywhere, the browser's tools with it.
    await home.set('gateway.tools.deny', ['web.search', 'browser.*']);
    expect((await invoke('web.search', { query: 'gateway' })).status).to.equal(404);
    expect((await invoke('browser.open', { url: 'https://example.org/' })).status).to.equal(404);
    await home.set('gateway.tools.deny', []);
    await home.set('tools.web.search.provider', 'searxng');
    const noBase = await invoke('web.search', { query: 'gateway' });
    expect(noBase.status).to.equal(503);
    expect(noBase.body.message).to.include('tools.web.search.baseUrl');
  });

  it('SearXNG: its JSON API asked, results as title, url and snippet; an instance without the JSON format is said plainly', async () => {
    await home.set('tools.web.search', { provider: 'searxng', baseUrl: `${searxngUrl}/searx` });
    const found = await invoke('web.search', { query: 'gateway release' });
    expect(found.status, JSON.stringify(found.body)).to.equal(200);
    expect(found.body.result).to.deep.equal({
      provider: 'searxng', query: 'gateway release',
      results: [
        { title: 'Gateway release notes', url: 'https://example.org/releases', snippet: 'What changed in 2.1 & before' },
        { title: 'Second', url: 'https://example.net/second', snippet: 'another one' },
      ],
    });
    expect(seen[0]!.path).to.equal('/searx/search');
    expect(seen[0]!.query.get('q')).to.equal('gateway release');
    expect(seen[0]!.query.get('format')).to.equal('json');
    expect((await invoke('web.search', { query: 'gateway', count: 1 })).body.result.results).to.have.length(1);

    searxngJson = false;
    const refused = await invoke('web.search', { query: 'gateway' });
    searxngJson = true;
    expect(refused.status).to.equal(502);
    expect(refused.body.message).to.match(/SearXNG at 127\.0\.0\.1:\d+ refused the search \(403\): 403 Forbidden; its settings\.yml must list json under search\.formats/);

    const closed = await freePort();
    await home.set('tools.web.search.baseUrl', `http://127.0.0.1:${closed}`);
    const away = await invoke('web.search', { query: 'gateway' });
    expect(away.status).to.equal(502);
    expect(away.body.message).to.match(/could not be reached \(ECONNREFUSED\)/);
  });

  it('Brave: the key from the secret store in X-Subscription-Token, count passed on; a refused key and a rate limit said plainly, the key never shown', async () => {
    await home.set('tools.web.search', { provider: 'brave', baseUrl: braveUrl, count: 3 });
    const noKey = await invoke('web.search', { query: 'gateway' });
    expect(noKey.status).to.equal(503);
    expect(noKey.body.message).to.include('gateway secrets set tools.web.search.brave.apiKey');

    expect((await home.run(['secrets', 'set', 'tools.web.search.brave.apiKey'], { input: 'BSA-wrong-key\n' })).code).to.equal(0);
    const wrong = await invoke('web.search', { query: 'gateway' });
    expect(wrong.status).to.equal(502);
    expect(wrong.body.message).to.include('Brave Search refused the API key (401): The provided subscription token is invalid. (SUBSCRIPTION_TOKEN_INVALID)');
    expect(wrong.body.message).to.not.include('BSA-wrong-key');

    expect((await home.run(['secrets', 'set', 'tools.web.search.brave.apiKey'], { input: `${BRAVE_KEY}\n` })).code).to.equal(0);
    const found = await invoke('web.search', { query: 'gateway' });
    expect(found.status, JSON.stringify(found.body)).to.equal(200);
    expect(found.body.result.results).to.deep.equal([1, 2, 3].map((i) => ({ title: `Brave result ${i}`, url: `https://brave.example/${i}`, snippet: `About gateway ${i}` })));
    const asked = seen.at(-1)!;
    expect(asked.headers['x-subscription-token']).to.equal(BRAVE_KEY);
    expect(asked.query.get('count')).to.equal('3');
    expect((await invoke('web.search', { query: 'gateway', count: 7 })).body.result.results).to.have.length(7);

    braveMode = 'limited';
    const limited = await invoke('web.search', { query: 'gateway' });
    braveMode = 'ok';
    expect(limited.status).to.equal(429);
    expect(limited.headers.get('retry-after')).to.equal('7');
    expect(limited.body.message).to.include('Brave Search says too many searches (Request rate limit exceeded for plan. (RATE_LIMITED)); try again in 7 s.');

    await home.set('tools.web.search.timeoutMs', 1000);
    braveMode = 'hang';
    const hung = await invoke('web.search', { query: 'gateway' });
    braveMode = 'ok';
    expect(hung.status).to.equal(502);
    expect(hung.body.message).to.include('Brave Search did not answer within 1000 ms');

    const log = (await home.run(['logs', '-n', '500', '--raw'])).stdout;
    expect(log).to.not.include(BRAVE_KEY);
    expect(readFileSync(home.file('config.json'), 'utf8')).to.not.include(BRAVE_KEY);
  });

  it('Tavily: POST /search with the bearer key and max_results; its rate limit and plan limit said plainly', async () => {
    await home.set('tools.web.search', { provider: 'tavily', baseUrl: tavilyUrl });
    expect((await home.run(['secrets', 'set', 'tools.web.search.tavily.apiKey'], { input: `${TAVILY_KEY}\n` })).code).to.equal(0);
    const found = await invoke('web.search', { query: 'who made the gateway', count: 2 });
    expect(found.status, JSON.stringify(found.body)).to.equal(200);
    expect(found.body.result).to.deep.equal({
      provider: 'tavily', query: 'who made the gateway',
      results: [{ title: 'Tavily 1', url: 'https://tavily.example/1', snippet: 'Snippet 1' }, { title: 'Tavily 2', url: 'https://tavily.example/2', snippet: 'Snippet 2' }],
    });
    const asked = seen.at(-1)!;
    expect(asked.method).to.equal('POST');
    expect(asked.headers.authorization).to.equal(`Bearer ${TAVILY_KEY}`);
    expect(JSON.parse(asked.body)).to.include({ query: 'who made the gateway', max_results: 2 });

    tavilyMode = 'limited';
    const limited = await invoke('web.search', { query: 'gateway' });
    expect(limited.status).to.equal(429);
    expect(limited.headers.get('retry-after')).to.equal('12');
    expect(limited.body.message).to.include('Tavily says too many searches (Your request has been blocked due to excessive requests');
    tavilyMode = 'plan';
    const plan = await invoke('web.search', { query: 'gateway' });
    tavilyMode = 'ok';
    expect(plan.status).to.equal(502);
    expect(plan.body.message).to.include('Tavily refused the search: the plan\'s usage limit is reached');
  });
});
