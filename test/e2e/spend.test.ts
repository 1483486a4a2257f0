import { expect } from 'chai';
import { freePort, Home } from '../support/cli.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';

describe('spend: each model call priced, gateway usage and /metrics in money, an agent\'s budget enforced (e2e)', function () {
  this.timeout(120_000);
  let home: Home;
  let upstream: ScriptedUpstream;
  let base: string;

  before(async () => {
    upstream = await new ScriptedUpstream().start();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    // 2 EUR a million tokens in, 10 out: a call of 100,000 in and 20,000 out costs 0.40 EUR.
    await home.set('models', { currency: 'EUR', providers: { script: { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 }, prices: { m: { input: 2, output: 10 } } } } });
    await home.set('agents', { spender: { model: 'script/m', budget: { daily: 1 } }, free: { model: 'script/m' } });
    await home.set('metrics.enabled', true);
    await home.set('gateway.http.endpoints', { chatCompletions: { enabled: true } });
    expect((await home.run(['start'])).code).to.equal(0);
  });
  after(async () => {
    home?.cleanup();
    await upstream?.stop();
  });

  it('prices each call, warns at 80 % once, refuses at the cap before the model is called, and shows it all in money', async () => {
    const usage = { prompt_tokens: 100_000, completion_tokens: 20_000 };
    for (let index = 0; index < 3; index++) upstream.enqueue(openaiText(`answer ${index}`, usage));
    for (let index = 0; index < 3; index++) {
      const chat = await home.run(['chat', '--agent', 'spender', `question ${index}`, '--json']);
      expect(chat.code, chat.stderr).to.equal(0);
    }
    const before = upstream.requests.length;
    const refused = await home.run(['chat', '--agent', 'spender', 'one more']);
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.include('Agent spender has spent its daily budget (1.20 EUR of 1.00 EUR); it runs again after');
    expect(upstream.requests.length, 'the model was not called').to.equal(before);
    // Another agent is not held by this one's cap.
    upstream.enqueue(openaiText('free answer', usage));
    expect((await home.run(['chat', '--agent', 'free', 'hello', '--json'])).code).to.equal(0);

    const summary = await home.json(['usage']);
    expect(summary.currency).to.equal('EUR');
    expect(summary.total.cost).to.be.closeTo(1.6, 1e-9);
    expect(summary.byAgent.find((group: any) => group.key === 'spender').cost).to.be.closeTo(1.2, 1e-9);
    expect(summary.byModel.find((group: any) => group.key === 'script/m').cost).to.be.closeTo(1.6, 1e-9);
    const text = await home.run(['usage']);
    expect(text.stdout).to.include('1.60 EUR');

    const metrics = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${home.token()}` } })).text();
    const line = metrics.split('\n').find((entry) => entry.startsWith('gateway_model_cost_total{') && entry.includes('gateway_agent="spender"'));
    expect(line, metrics.slice(0, 2000)).to.match(/currency="EUR".* 1\.2(0000000000000\d*)?$/);

    const audit = (await home.run(['audit', '--json'])).stdout;
    expect(audit.match(/budget\.warning/g)).to.have.length(1);
    expect(audit.match(/budget\.reached/g)).to.have.length(1);
  });

  it('a product token\'s budget holds for it and the tokens made with it: minting tokens buys nothing more to spend', async () => {
    const usage = { prompt_tokens: 100_000, completion_tokens: 20_000 };
    const made = await home.run(['tokens', 'create', '--name', 'app', '--scope', 'inference', '--scope', 'tokens:write', '--budget-daily', '0.5', '--json']);
    expect(made.code, made.stderr).to.equal(0);
    expect(made.json.budget).to.deep.equal({ daily: 0.5 });
    expect(made.stdout).to.include('"budget"');
    const parent = made.json.token as string;
    const child = await (await fetch(`${base}/tokens`, { method: 'POST', headers: { authorization: `Bearer ${parent}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'child', scopes: ['inference'] }) })).json() as any;
    expect(child.token).to.match(/^gwt_/);
    const ask = (token: string) => fetch(`${base}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gateway/free', messages: [{ role: 'user', content: 'hi' }] }),
    });
    upstream.enqueue(openaiText('one', usage), openaiText('two', usage));
    expect((await ask(child.token)).status).to.equal(200);
    expect((await ask(parent)).status).to.equal(200);
    const before = upstream.requests.length;
    const refused = await ask(child.token);
    expect(refused.status).to.equal(429);
    const body = await refused.json() as any;
    expect(body.error.message).to.match(new RegExp(`^Token ${made.json.id} has spent its daily budget \\(0\\.80 EUR of 0\\.50 EUR\\)`));
    expect(body.error.code).to.equal('budget_exceeded');
    expect(Number(refused.headers.get('retry-after'))).to.be.greaterThan(0);
    expect(upstream.requests.length).to.equal(before);
    const listed = await home.json(['tokens', 'list']);
    expect(listed.tokens.find((token: any) => token.id === made.json.id).budget).to.deep.equal({ daily: 0.5 });
  });
});
