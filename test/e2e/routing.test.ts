import { expect } from 'chai';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { IrcServer, IrcUser } from '../support/irc.ts';
import { openaiText, openaiToolCalls, type Received, ScriptedUpstream } from '../support/scripted-upstream.ts';

/** What a person said last in a request, as the model read it. */
const lastUserText = (request: Received) => String(request.body.messages.filter((message: any) => message.role === 'user').at(-1)?.content ?? '');

describe('routing: each person and room on IRC answered by its own agent, in sessions of its own (e2e)', function () {
  this.timeout(120_000);
  let ircd: IrcServer;
  let home: Home;
  let nick: string;
  const users: IrcUser[] = [];
  const upstreams: Record<string, ScriptedUpstream> = {};

  const json = async (args: string[]) => {
    const result = await home.run([...args, '--json']);
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0);
    return JSON.parse(result.stdout);
  };
  const person = async (name: string) => {
    const user = await IrcUser.connect(ircd.port, name);
    users.push(user);
    return user;
  };

  before(async () => {
    ircd = await IrcServer.start();
    for (const agent of ['main', 'personal', 'ops']) {
      const upstream = await new ScriptedUpstream().start();
      // Each agent says who it is, and what it was asked.
      upstream.responder = (request) => openaiText(`${agent} answers: ${lastUserText(request)}`);
      upstreams[agent] = upstream;
    }
    nick = `gw${process.pid % 10000}`;
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    for (const [agent, upstream] of Object.entries(upstreams)) {
      await home.set(`models.providers.${agent}`, { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
      await home.set(`agents.${agent}`, { model: `${agent}/m` });
    }
    await home.set('agents.main.delegation', { agents: ['personal'] });
    await home.set('channels.irc', {
      enabled: true, host: '127.0.0.1', port: ircd.port, nick, rooms: ['#ops'], allowFrom: ['Alice', 'Bob'], agent: 'main',
      routes: [{ match: { peer: 'Alice' }, agent: 'personal' }, { match: { room: '#Ops' }, agent: 'ops' }],
    });
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    await waitFor(async () => ((await json(['channels', 'status'])).channels.find((c: any) => c.channel === 'irc')?.state === 'connected' || undefined), 20_000, 'the gateway to connect to IRC');
  });
  after(async () => {
    users.splice(0).forEach((user) => user.quit());
    home?.cleanup();
    await ircd?.stop();
    await Promise.all(Object.values(upstreams).map((upstream) => upstream.stop()));
  });

  it('shows who answers whom, and refuses a route to an agent that does not exist', async () => {
    const routes = await json(['channels', 'routes', 'irc']);
    expect(routes.routes.map((route: any) => [route.order, route.who, route.agent])).to.deep.equal([[1, 'peer Alice', 'personal'], [2, 'room #Ops', 'ops']]);
    expect(routes.routes[1].sessions).to.equal('irc:<account>:agent:ops:group:#Ops');
    expect(routes.otherwise.agent).to.equal('main');
    const text = await home.run(['channels', 'routes', 'irc']);
    expect(text.stdout).to.match(/1\s+peer Alice\s+personal/).and.to.match(/everyone else\s+main/);

    const refused = await home.run(['config', 'set', 'channels.irc.routes', JSON.stringify([{ match: { peer: 'carol' }, agent: 'ghost' }])]);
    expect(refused.code).to.equal(2);
    expect(refused.stderr).to.include('channels.irc.routes.0 (peer carol -> ghost): there is no agent "ghost" (agents: main, personal, ops)');
    const unmatched = await home.run(['config', 'set', 'channels.irc.routes', JSON.stringify([{ match: {}, agent: 'ops' }])]);
    expect(unmatched.code).to.equal(2);
    expect(unmatched.stderr).to.include('a route must match an account, a peer or a room');
    // Removing an agent a route names is refused as well: the route would be left naming no one.
    const removed = await home.run(['config', 'unset', 'agents.ops']);
    expect(removed.code).to.equal(2);
    expect(removed.stderr).to.include('channels.irc.routes.1 (room #Ops -> ops): there is no agent "ops"');
    expect((await home.run(['channels', 'routes', 'nope'])).code).to.equal(5);
  });

  it('answers a person by their route, another by the channel\'s agent, and a room by its route, each agent in its own session', async () => {
    const alice = await person('Alice');
    const bob = await person('Bob');
    alice.say(nick, 'hello from alice');
    bob.say(nick, 'hello from bob');
    expect((await alice.waitFor(/answers/, { timeoutMs: 20_000 })).text).to.equal('personal answers: hello from alice');
    expect((await bob.waitFor(/answers/, { timeoutMs: 20_000 })).text).to.equal('main answers: hello from bob');

    await bob.join('#ops');
    await alice.join('#ops');
    await sleep(300);
    const seen = bob.received.length;
    bob.say('#ops', `${nick}: is the deploy done?`);
    const roomAnswer = await bob.waitFor(/ops answers/, { after: seen, timeoutMs: 20_000 });
    expect(roomAnswer).to.include({ target: '#ops', text: 'ops answers: Bob: is the deploy done?' });
    // Routes are checked in order: Alice's own route comes before the room's.
    alice.say('#ops', `${nick}: and the tests?`);
    expect((await bob.waitFor(/personal answers/, { after: seen, timeoutMs: 20_000 })).text).to.equal('personal answers: Alice: and the tests?');

    const keys = (await json(['sessions', 'list', '--channel', 'irc'])).sessions.map((session: any) => session.key).sort();
    expect(keys).to.include.members(['irc:default:agent:personal:dm:alice', 'irc:default:dm:bob', 'irc:default:agent:ops:group:#ops', 'irc:default:agent:personal:group:#ops']);
    const opsRoom = await json(['sessions', 'show', 'irc:default:agent:ops:group:#ops']);
    expect(opsRoom.messages.map((message: any) => message.text)).to.deep.equal([`${nick}: is the deploy done?`, 'ops answers: Bob: is the deploy done?']);
    const agents = await json(['agents', 'list']);
    expect(agents.agents.find((agent: any) => agent.id === 'personal').routes).to.deep.equal([{ channel: 'irc', order: 1, match: { peer: 'Alice' } }]);
    expect(agents.agents.find((agent: any) => agent.id === 'main').routes).to.deep.equal([{ channel: 'irc', order: null, match: {} }]);
  });

  it('a task a channel\'s agent delegates without waiting is answered to the person over IRC, once', async () => {
    const bob = users.find((user) => user.nick === 'Bob') ?? await person('Bob');
    upstreams.main!.enqueue(
      openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'personal', task: 'Summarise the week.', wait: false } }]),
      openaiText('I will come back to you with the summary.'),
    );
    upstreams.personal!.enqueue({ ...openaiText('A calm week.'), delayMs: 1000 });
    const seen = bob.received.length;
    bob.say(nick, 'summarise my week please');
    expect((await bob.waitFor(/come back to you/, { after: seen, timeoutMs: 20_000 })).text).to.equal('I will come back to you with the summary.');
    // The child's answer comes back as a new turn of Bob's conversation; the main agent's answer to it goes to Bob.
    const later = await bob.waitFor(/main answers: Agent personal answered/, { after: seen, timeoutMs: 30_000 });
    expect(later.text).to.equal('main answers: Agent personal answered the task you delegated (delegate:irc:default:dm:bob:1):');
    await bob.waitFor(/^A calm week\.$/, { after: seen });
    await sleep(1500);
    expect(bob.received.slice(seen).filter((message) => message.text.startsWith('main answers: Agent personal answered')), 'delivered once').to.have.length(1);
    const shown = await json(['sessions', 'show', 'irc:default:dm:bob']);
    expect(shown.delegation.children[0]).to.include({ agent: 'personal', status: 'succeeded', answer: 'A calm week.', parentSession: 'irc:default:dm:bob' });
  });
});
