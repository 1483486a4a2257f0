import { expect } from 'chai';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { codeIn, IrcServer, IrcUser } from '../support/irc.ts';
import { startModelServer } from '../support/model-server.ts';
import { sharedPostgres } from '../support/postgres.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';
import { deliver, TEST_WEBHOOK_SECRET } from '../support/webhooks.ts';

/** GitHub's own example payload of a push to a branch (octokit/webhooks' examples). */
function githubPush(): Record<string, any> {
  const examples = createRequire(import.meta.url)('@octokit/webhooks-examples') as { name: string; examples: Record<string, any>[] }[];
  return examples.find((event) => event.name === 'push')!.examples.find((example) => example.ref === 'refs/heads/master' && example.head_commit)!;
}

const HOOKS_TOKEN = 'hooks-token-for-automation-tests';

describe('automations: schedules, deliveries and hooks that run agents (e2e)', function () {
  let home: Home;
  let upstream: ScriptedUpstream;

  const run = async (args: string[]) => home.run(args);
  const json = async (args: string[]) => {
    const result = await home.run([...args, '--json']);
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0);
    return JSON.parse(result.stdout);
  };
  const set = (key: string, value: unknown) => home.set(key, value);
  const runs = async (id: string) => (await json(['automations', 'runs', id, '--limit', '200'])).runs as any[];

  beforeEach(async () => {
    upstream = await new ScriptedUpstream().start();
    home = new Home({ GATEWAY_PORT: String(await freePort()), GATEWAY_WEBHOOK_SECRET: TEST_WEBHOOK_SECRET, GATEWAY_HOOKS_TOKEN: HOOKS_TOKEN });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
  });
  afterEach(async () => {
    await home.run(['stop']);
    home.cleanup();
    await upstream.stop();
  });

  it('every 1s and a cron with seconds fire on the real clock, once per scheduled time; disabling, changing and removing apply without a restart', async function () {
    this.timeout(60_000);
    expect((await run(['automations', 'add', 'tick', '--every', '1s', '--agent', 'helper', '--prompt', 'tick at {{scheduledFor}}'])).code).to.equal(0);
    expect((await run(['automations', 'add', 'even', '--cron', '*/2 * * * * *', '--tz', 'Europe/Berlin', '--agent', 'helper', '--prompt', 'even'])).code).to.equal(0);
    expect((await run(['start'])).code).to.equal(0);
    await waitFor(async () => ((await runs('tick')).filter((r) => r.state === 'succeeded').length >= 4 ? true : undefined), 20_000, 'four firings of tick');
    await waitFor(async () => ((await runs('even')).filter((r) => r.state === 'succeeded').length >= 2 ? true : undefined), 20_000, 'two firings of even');

    const ticks = (await runs('tick')).filter((r) => r.state === 'succeeded').reverse();
    const times = ticks.map((r) => Date.parse(r.scheduledFor));
    for (const at of times) expect(at % 1000, 'on whole seconds').to.equal(0);
    expect(new Set(times).size, 'each scheduled time once').to.equal(times.length);
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).to.equal(1000);
    for (const r of ticks) {
      expect(r).to.include({ text: 'Hello from the script.', deliveredTo: null, error: null });
      expect(r.usage).to.deep.equal({ inputTokens: 11, outputTokens: 7 });
      expect(Date.parse(r.firedAt) - Date.parse(r.scheduledFor), 'fired on time').to.be.within(0, 1000);
    }
    // The template was filled from the firing: the model read the scheduled time.
    const prompts = upstream.requests.map((request) => JSON.stringify(request.body.messages));
    expect(prompts.some((prompt) => prompt.includes(`tick at ${ticks[0]!.scheduledFor}`))).to.equal(true);
    for (const r of (await runs('even')).filter((one) => one.state === 'succeeded')) expect(Date.parse(r.scheduledFor) % 2000).to.equal(0);

    const listed = await json(['automations', 'list']);
    const tick = listed.automations.find((a: any) => a.id === 'tick');
    expect(tick).to.include({ enabled: true, when: 'every 1s', catchUp: 'last' });
    expect(Date.parse(tick.nextAt)).to.be.above(Date.now() - 1000);
    expect(tick.last.state).to.be.oneOf(['succeeded', 'running', 'queued']);

    // Disabled: no firing after it (one already running may finish).
    expect((await run(['automations', 'disable', 'tick'])).code).to.equal(0);
    await sleep(300);
    const disabledAt = (await runs('tick')).length;
    await sleep(2500);
    expect((await runs('tick')).length, 'no firing while disabled').to.equal(disabledAt);
    expect((await json(['automations', 'show', 'tick'])).nextAt).to.equal(null);

    // Changed: the new schedule applies at once.
    await set('automations.even.trigger', { cron: '*/3 * * * * *' });
    expect(Date.parse((await json(['automations', 'show', 'even'])).nextAt) % 3000).to.equal(0);
    // Removed: gone from the list, and its firings stop.
    expect((await run(['automations', 'remove', 'even'])).code).to.equal(0);
    expect((await json(['automations', 'list'])).automations.map((a: any) => a.id)).to.deep.equal(['tick']);
    const gone = await run(['automations', 'runs', 'even']);
    expect(gone.code).to.equal(5);
    expect(gone.stderr).to.include('No automation even');
  });

  it('refuses an automation that could not fire or act, whether the daemon runs or not, and writes nothing', async function () {
    this.timeout(60_000);
    const refused = async (value: unknown, why: RegExp) => {
      const result = await run(['config', 'set', 'automations.bad', JSON.stringify(value)]);
      expect(result.code, JSON.stringify(value)).to.equal(2);
      expect(result.stderr, result.stderr).to.match(why);
    };
    const cases: [unknown, RegExp][] = [
      [{ trigger: { at: '2020-01-01T00:00:00Z' }, action: { agent: 'helper', prompt: 'x' } }, /automations\.bad\.trigger\.at: 2020-01-01T00:00:00Z is in the past/],
      [{ trigger: { cron: '61 * * * *' }, action: { agent: 'helper', prompt: 'x' } }, /automations\.bad\.trigger\.cron: "61 \* \* \* \*" is not a cron expression \(Invalid value for minute: 61\)/],
      [{ trigger: { cron: '0 9 * * *', tz: 'Mars/Olympus' }, action: { agent: 'helper', prompt: 'x' } }, /trigger\.tz: Mars\/Olympus is not an IANA time zone/],
      [{ trigger: { every: '1h' }, action: { agent: 'nobody', prompt: 'x' } }, /automations\.bad\.action\.agent: no agent nobody \(agents: helper\)/],
      [{ trigger: { every: '1h' }, action: { message: { channel: 'irc', to: 'alice', text: 'x' } } }, /action\.message\.channel: no channel irc is configured/],
      [{ trigger: { every: '1h' }, action: { agent: 'helper', prompt: 'x', deliver: { channel: 'telegram', to: '1' } } }, /action\.deliver\.channel: no channel telegram is configured/],
      [{ trigger: { every: '1h' }, action: { agent: 'helper', prompt: 'Report {{scheduledFor}} for {{repository}}' } }, /the template names \{\{repository\}\}, which the trigger's payload does not hold/],
      [{ trigger: { webhook: { event: 'push' } }, action: { agent: 'helper', prompt: '{{payload.head_commit.message}} {{payload.pull_request.title}}' } }, /names \{\{payload\.pull_request\.title\}\}/],
      [{ trigger: { every: '1h', at: '2099-01-01T00:00:00Z' }, action: { agent: 'helper', prompt: 'x' } }, /name exactly one of cron, every, at, webhook, hook \(got every, at\)/],
      [{ trigger: { every: '1h' }, action: { agent: 'helper', prompt: 'x', deliver: 'session' } }, /"session" delivers to the channel of action\.session, which is isolated/],
      [{ trigger: { every: '0s' }, action: { agent: 'helper', prompt: 'x' } }, /automations\.bad\.trigger\.every/],
    ];
    for (const [value, why] of cases) await refused(value, why);
    expect((await json(['config', 'get', 'automations'])).value, 'nothing written while stopped').to.deep.equal({});

    expect((await run(['start'])).code).to.equal(0);
    for (const [value, why] of cases) await refused(value, why);
    const addRefused = await run(['automations', 'add', 'bad', '--at', '2001-01-01T00:00:00Z', '--agent', 'helper', '--prompt', 'x']);
    expect(addRefused.code).to.equal(2);
    expect(addRefused.stderr).to.include('is in the past');
    expect((await json(['automations', 'list'])).automations, 'nothing written while running').to.deep.equal([]);

    // A one-shot in the future is taken; once it has passed, other changes are not blamed for it.
    const soon = new Date(Date.now() + 1500).toISOString();
    expect((await run(['automations', 'add', 'once', '--at', soon, '--agent', 'helper', '--prompt', 'once'])).code).to.equal(0);
    expect((await run(['automations', 'add', 'once', '--every', '1h', '--agent', 'helper', '--prompt', 'x'])).code, 'an id taken').to.equal(1);
    await waitFor(async () => ((await runs('once')).some((r) => r.state === 'succeeded') ? true : undefined), 15_000, 'the one-shot to fire');
    await set('agents.other', { model: 'script/m' });
    // The agent an automation runs cannot be removed from under it.
    const unset = await run(['config', 'unset', 'agents.helper']);
    expect(unset.code).to.equal(2);
    expect(unset.stderr).to.include('automations.once.action.agent: no agent helper');
    expect((await json(['automations', 'show', 'once'])).nextAt).to.equal(null);
    await sleep(1500);
    expect(await runs('once'), 'a one-shot fires once').to.have.length(1);
  });

  it('a GitHub push (GitHub\'s own example payload) runs the agent on the real model, and its answer reaches an approved sender over IRC once', async function () {
    this.timeout(120_000);
    const ircd = await IrcServer.start();
    const model = await startModelServer();
    const friend = await IrcUser.connect(ircd.port, `pat${process.pid % 1000}`);
    try {
      const nick = `gw${process.pid % 1000}`;
      await set('channels.irc', { enabled: true, host: '127.0.0.1', port: ircd.port, nick, reconnectMaxDelayMs: 2000 });
      await set('models.providers.local', { kind: 'openai-compatible', baseUrl: model.url, models: ['stories'] });
      await set('agents.storyteller', { model: 'local/stories', maxOutputTokens: 12 });
      expect((await run(['start'])).code).to.equal(0);
      await waitFor(async () => ((await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'irc').state === 'connected' ? true : undefined), 20_000, 'IRC');
      friend.say(nick, 'hello');
      const code = codeIn((await friend.waitFor(/pairing code is/)).text);
      expect((await run(['pair', 'approve', 'irc', code])).code).to.equal(0);

      const push = githubPush();
      const added = await run(['automations', 'add', 'story', '--webhook', 'push', '--repository', 'codertocat/hello-world', '--ref', 'refs/heads/master',
        '--agent', 'storyteller', '--prompt', 'Once upon a time {{payload.head_commit.message}}', '--deliver', `irc:${friend.nick}`]);
      expect(added.code, added.stderr).to.equal(0);
      const prompt = `Once upon a time ${push.head_commit.message}`;
      const expected = await (await fetch(`${model.url}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: prompt }], max_tokens: 12 }) })).json() as any;
      const story = (expected.choices[0].message.content as string).trim();

      const base = `http://127.0.0.1:${home.lock().port}`;
      const body = JSON.stringify(push);
      const deliveryId = randomUUID();
      const seen = friend.received.length;
      expect((await deliver(base, 'push', body, { deliveryId })).status).to.equal(200);
      // The same delivery again, and a push to another ref: neither fires.
      expect((await deliver(base, 'push', body, { deliveryId })).body).to.include({ duplicate: true });
      expect((await deliver(base, 'push', JSON.stringify({ ...push, ref: 'refs/heads/other' }))).status).to.equal(200);
      const answer = await friend.waitFor(/\S/, { after: seen, timeoutMs: 60_000 });
      expect(answer).to.include({ from: nick, type: 'privmsg' });
      expect(answer.text).to.equal(story);
      await sleep(2000);
      expect(friend.received.slice(seen).filter((message) => message.from === nick), 'delivered once').to.have.length(1);
      const fired = await runs('story');
      expect(fired).to.have.length(1);
      expect(fired[0]).to.include({ state: 'succeeded', text: story, deliveredTo: `irc:default:${friend.nick}`, key: `delivery--${deliveryId}` });
    } finally {
      friend.quit();
      model.stop();
      await ircd.stop();
    }
  });

  it('lists 1,200 automations page by page, each scheduled, long prompts cut in the list and whole in show', async function () {
    this.timeout(60_000);
    const file = home.file('config.json');
    const config = JSON.parse(readFileSync(file, 'utf8'));
    config.automations = Object.fromEntries(Array.from({ length: 1200 }, (_, i) => [`n${String(i).padStart(4, '0')}`, {
      trigger: { cron: `${i % 60} ${i % 24} * * *`, tz: 'Asia/Tokyo' }, action: { agent: 'helper', prompt: `${'long prompt '.repeat(100)}${i}` },
    }]));
    writeFileSync(file, JSON.stringify(config));
    expect((await run(['start'])).code).to.equal(0);
    // They are placed on the clock once the daemon is ready, in slices: a moment after the start, each has its next firing.
    const listed = await waitFor(async () => {
      const all = (await json(['automations', 'list'])).automations as any[];
      return all.every((automation) => automation.nextAt) ? all : undefined;
    }, 20_000, 'every automation to be scheduled');
    expect(listed).to.have.length(1200);
    expect(listed.map((a) => a.id)).to.deep.equal(Object.keys(config.automations));
    for (const automation of listed) {
      expect(automation.nextAt, automation.id).to.be.a('string');
      expect(automation.action.prompt.length).to.be.at.most(200);
    }
    expect((await json(['automations', 'show', 'n0042'])).action.prompt).to.equal(`${'long prompt '.repeat(100)}42`);
  });

  it('a message action sends its text, filled from the firing, to an IRC recipient once per firing', async function () {
    this.timeout(60_000);
    const ircd = await IrcServer.start();
    const dana = await IrcUser.connect(ircd.port, `dana${process.pid % 1000}`);
    try {
      const nick = `gw${process.pid % 1000}`;
      await set('channels.irc', { enabled: true, host: '127.0.0.1', port: ircd.port, nick, reconnectMaxDelayMs: 2000 });
      expect((await run(['start'])).code).to.equal(0);
      await waitFor(async () => ((await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'irc').state === 'connected' ? true : undefined), 20_000, 'IRC');
      const added = await run(['automations', 'add', 'heartbeat', '--every', '2s', '--message', 'Heartbeat at {{scheduledFor}}', '--to', `irc:${dana.nick}`]);
      expect(added.code, added.stderr).to.equal(0);
      await dana.waitFor(/^Heartbeat at \d{4}-/, { timeoutMs: 15_000 });
      const got = await dana.waitFor(/^Heartbeat at \d{4}-/, { after: dana.received.findIndex((m) => /^Heartbeat/.test(m.text)) + 1, timeoutMs: 15_000 });
      expect(got.from).to.equal(nick);
      expect((await run(['automations', 'disable', 'heartbeat'])).code).to.equal(0);
      await sleep(2500);
      const fired = (await runs('heartbeat')).filter((r) => r.state === 'succeeded');
      const beats = dana.received.filter((m) => /^Heartbeat at /.test(m.text)).map((m) => m.text);
      expect(new Set(beats).size, 'each firing sent once').to.equal(beats.length);
      expect(beats.length).to.equal(fired.length);
      for (const r of fired) {
        expect(r.deliveredTo).to.equal(`irc:default:${dana.nick}`);
        expect(beats).to.include(`Heartbeat at ${r.scheduledFor}`);
      }
    } finally {
      dana.quit();
      await ircd.stop();
    }
  });

  it('a hook fires its automation once per Idempotency-Key, the payload filling the prompt', async () => {
    await set('hooks.enabled', true);
    expect((await run(['automations', 'add', 'deploys', '--hook', 'deployed', '--agent', 'helper', '--prompt', 'Deployed {{payload.service}} at {{payload.version}}'])).code).to.equal(0);
    expect((await run(['start'])).code).to.equal(0);
    const base = `http://127.0.0.1:${home.lock().port}`;
    const post = (key: string) => fetch(`${base}/hooks/deployed`, {
      method: 'POST', headers: { authorization: `Bearer ${HOOKS_TOKEN}`, 'content-type': 'application/json', 'idempotency-key': key }, body: JSON.stringify({ service: 'api', version: '1.2.3' }),
    });
    const first = await post('deploy-1');
    expect(first.status).to.equal(200);
    const answer = await first.json() as any;
    expect(answer.results).to.have.length(1);
    expect(answer.results[0]).to.include({ action: 'automation', automation: 'deploys' });
    const again = await post('deploy-1');
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect((await again.json() as any).results[0].jobId).to.equal(answer.results[0].jobId);
    await waitFor(async () => ((await runs('deploys'))[0]?.state === 'succeeded' ? true : undefined), 10_000, 'the hook\'s firing');
    expect(await runs('deploys')).to.have.length(1);
    expect(JSON.stringify(upstream.requests[0]!.body.messages)).to.include('Deployed api at 1.2.3');
    // Another name is still no hook.
    expect((await fetch(`${base}/hooks/other`, { method: 'POST', headers: { authorization: `Bearer ${HOOKS_TOKEN}`, 'content-type': 'application/json' }, body: '{}' })).status).to.equal(404);
  });

  it('firings missed while stopped follow catchUp (skip, last, all); a failing firing is recorded failed after its last attempt, and jobs retry replays it', async function () {
    this.timeout(90_000);
    for (const policy of ['skip', 'last', 'all']) {
      expect((await run(['automations', 'add', policy, '--every', '1s', '--catch-up', policy, '--agent', 'helper', '--prompt', policy])).code).to.equal(0);
    }
    expect((await run(['start'])).code).to.equal(0);
    await waitFor(async () => ((await runs('all')).length >= 2 ? true : undefined), 15_000, 'firings before the stop');
    expect((await run(['stop'])).code).to.equal(0);
    const stoppedAt = Date.now();
    await sleep(4000);
    expect((await run(['start'])).code).to.equal(0);
    const startedAt = Date.now();
    await sleep(1500);
    const missed = async (id: string) => (await runs(id)).filter((r) => r.firedBy === 'catch-up');
    expect(await missed('skip'), 'skip makes up for nothing').to.have.length(0);
    const [latest] = await missed('last');
    expect(Date.parse(latest.scheduledFor), 'last makes up for the latest').to.be.within(startedAt - 2000, startedAt);
    const all = (await missed('all')).map((r) => Date.parse(r.scheduledFor));
    expect(all.length, 'all makes up for each').to.be.at.least(4);
    expect(Math.min(...all)).to.be.within(stoppedAt - 1000, stoppedAt + 1000);
    for (const policy of ['skip', 'last', 'all']) {
      const regular = (await runs(policy)).filter((r) => r.firedBy === 'schedule' && Date.parse(r.scheduledFor) > stoppedAt);
      expect(regular.length, `${policy} fires on schedule again`).to.be.at.least(1);
      expect(Date.parse(regular.at(-1)!.scheduledFor), 'scheduled firings resume after the start').to.be.at.least(startedAt - 1500);
    }
    for (const policy of ['skip', 'last', 'all']) expect((await run(['automations', 'remove', policy])).code).to.equal(0);

    // The model fails every attempt: five attempts with backoff, then failed with the reason, never dropped.
    for (let i = 0; i < 5; i++) upstream.enqueue({ status: 500, json: { error: { message: 'the model is down' } } });
    expect((await run(['automations', 'add', 'flaky', '--every', '1d', '--agent', 'helper', '--prompt', 'try'])).code).to.equal(0);
    const fired = await json(['automations', 'run', 'flaky']);
    const failed = await waitFor(async () => {
      const [only] = await runs('flaky');
      return only?.state === 'failed' ? only : undefined;
    }, 40_000, 'the firing to fail after its attempts');
    expect(failed).to.include({ jobId: fired.jobId, attempts: 5, text: null });
    expect(failed.error).to.match(/500|model is down/);
    const text = await run(['automations', 'runs', 'flaky']);
    expect(text.stdout).to.include('failed (attempt 5)');
    expect((await run(['jobs', 'retry', fired.jobId])).code).to.equal(0);
    const retried = await waitFor(async () => {
      const [only] = await runs('flaky');
      return only?.state === 'succeeded' ? only : undefined;
    }, 15_000, 'the retried firing');
    expect(retried).to.include({ text: 'Hello from the script.' });
  });

  it('an agent schedules a reminder for its user (automations.add), answered in the same IRC conversation', async function () {
    this.timeout(60_000);
    const ircd = await IrcServer.start();
    const friend = await IrcUser.connect(ircd.port, `sam${process.pid % 1000}`);
    try {
      const nick = `gw${process.pid % 1000}`;
      await set('channels.irc', { enabled: true, host: '127.0.0.1', port: ircd.port, nick, agent: 'helper', reconnectMaxDelayMs: 2000 });
      await set('agents.helper', { model: 'script/m', tools: ['automations.add'] });
      expect((await run(['start'])).code).to.equal(0);
      await waitFor(async () => ((await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'irc').state === 'connected' ? true : undefined), 20_000, 'IRC');
      friend.say(nick, 'hello');
      const code = codeIn((await friend.waitFor(/pairing code is/)).text);
      expect((await run(['pair', 'approve', 'irc', code])).code).to.equal(0);

      const at = new Date(Date.now() + 4000).toISOString();
      upstream.enqueue(openaiToolCalls([{ name: 'automations.add', args: { at, prompt: 'Remind me to stretch' } }]), openaiText('I will remind you.'), openaiText('Time to stretch!'));
      const seen = friend.received.length;
      friend.say(nick, 'remind me to stretch in a few seconds');
      await friend.waitFor(/^I will remind you\.$/, { after: seen, timeoutMs: 15_000 });
      const listed = (await json(['automations', 'list'])).automations;
      expect(listed).to.have.length(1);
      expect(listed[0].action).to.include({ agent: 'helper', prompt: 'Remind me to stretch', session: `irc:default:dm:${friend.nick.toLowerCase()}`, deliver: 'session' });
      await friend.waitFor(/^Time to stretch!$/, { after: seen, timeoutMs: 20_000 });
      // The reminder ran in the same conversation: the model saw it.
      expect(JSON.stringify(upstream.requests[2]!.body.messages)).to.include('remind me to stretch in a few seconds');
    } finally {
      friend.quit();
      await ircd.stop();
    }
  });

  describe('three daemons on one PostgreSQL', function () {
    it('each firing runs once; a daemon killed mid-run: another runs the firing again and the answer is delivered once', async function () {
      this.timeout(120_000);
      const pg = await sharedPostgres(freePort);
      const url = pg.createDatabase();
      const ircd = await IrcServer.start();
      const friend = await IrcUser.connect(ircd.port, `kim${process.pid % 1000}`);
      const nick = `gw${process.pid % 1000}`;
      const cluster: Home[] = [];
      try {
        for (let n = 0; n < 3; n++) {
          const node = new Home({ GATEWAY_PORT: String(await freePort()), GATEWAY_STORE_URL: url });
          cluster.push(node);
          for (const [key, value] of Object.entries({
            'models.providers.script': { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } },
            'agents.helper': { model: 'script/m' },
            'channels.irc': { enabled: true, host: '127.0.0.1', port: ircd.port, nick, reconnectMaxDelayMs: 1000 },
            'jobs.leaseSeconds': 5,
            'automations.tick': { trigger: { every: '1s' }, action: { agent: 'helper', prompt: 'tick' } },
          })) expect((await node.run(['config', 'set', key, JSON.stringify(value)])).code).to.equal(0);
        }
        for (const node of cluster) expect((await node.run(['start'])).code).to.equal(0);
        await sleep(6000);
        const perTime = pg.sql("SELECT scheduled_for || ':' || COUNT(*) FROM automation_firings WHERE automation = 'tick' GROUP BY scheduled_for", new URL(url).pathname.slice(1)).split('\n').filter(Boolean);
        expect(perTime.length, 'firings made').to.be.at.least(4);
        for (const row of perTime) expect(row.split(':')[1], `one firing per time (${row})`).to.equal('1');
        // Stopped on every daemon, and every firing finished: then each firing made one model request.
        for (const node of cluster) expect((await node.run(['automations', 'disable', 'tick'])).code).to.equal(0);
        await waitFor(async () => ((await cluster[0]!.run(['automations', 'runs', 'tick', '--json', '--limit', '200'])).json.runs.every((r: any) => r.state === 'succeeded' || r.skipped) ? true : undefined), 15_000, 'every firing to finish');
        const runsNow = ((await cluster[1]!.run(['automations', 'runs', 'tick', '--json', '--limit', '200'])).json.runs as any[]).filter((r) => !r.skipped);
        const requests = upstream.requests.filter((request) => JSON.stringify(request.body.messages).includes('tick')).length;
        expect(requests, 'each firing asked the model once').to.equal(runsNow.length);

        // The firing's run hangs on the daemon that took it; that daemon is killed; another runs it again (its sessions gone from the server, or at the latest its lease run out).
        friend.say(nick, 'hello');
        const code = codeIn((await friend.waitFor(/pairing code is/, { timeoutMs: 20_000 })).text);
        expect((await cluster[0]!.run(['pair', 'approve', 'irc', code])).code).to.equal(0);
        upstream.enqueue({ hang: true }, openaiText('Once, after all.'));
        const asked = upstream.requests.length;
        for (const node of cluster) {
          expect((await node.run(['config', 'set', 'automations.nudge', JSON.stringify({ trigger: { every: '1h' }, action: { agent: 'helper', prompt: 'nudge', deliver: { channel: 'irc', to: friend.nick } } })])).code).to.equal(0);
        }
        const fired = (await cluster[2]!.run(['automations', 'run', 'nudge', '--json'])).json;
        await waitFor(async () => (upstream.requests.length > asked ? true : undefined), 10_000, 'the run to ask the model');
        const owner = pg.sql(`SELECT claimed_by FROM jobs WHERE id = '${fired.jobId}'`, new URL(url).pathname.slice(1)).trim();
        const victim = (await Promise.all(cluster.map(async (node) => ((await node.run(['store', 'status', '--json'])).json?.self === owner ? node : undefined)))).find(Boolean)!;
        expect(victim, 'the daemon running the firing').to.not.equal(undefined);
        const seen = friend.received.length;
        process.kill(victim.lock().pid, 'SIGKILL');
        await friend.waitFor(/^Once, after all\.$/, { after: seen, timeoutMs: 60_000 });
        await sleep(2000);
        expect(friend.received.slice(seen).filter((message) => message.text === 'Once, after all.'), 'delivered once').to.have.length(1);
        const survivor = cluster.find((node) => node !== victim)!;
        const [nudge] = (await survivor.run(['automations', 'runs', 'nudge', '--json'])).json.runs;
        expect(nudge).to.include({ state: 'succeeded', text: 'Once, after all.', attempts: 2, deliveredTo: `irc:default:${friend.nick}` });
      } finally {
        friend.quit();
        for (const node of cluster) {
          await node.run(['stop']);
          node.cleanup();
        }
        await ircd.stop();
      }
    });
  });
});
