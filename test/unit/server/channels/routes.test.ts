import { expect } from 'chai';
import { routeOf, sessionAgent } from '../../../../src/server/channels/routes.ts';
import type { ChannelSettings } from '../../../../src/server/kernel/channel.ts';
import { documentProblems } from '../../../../src/shared/config/keys.ts';

const settings = (more: Record<string, unknown>) => ({ enabled: true, dmPolicy: 'pairing', allowFrom: [], ...more }) as ChannelSettings;
const fold = (peer: string) => peer.toLowerCase();

describe('channels: routes choose the agent that answers', () => {
  const routed = settings({
    agent: 'main',
    routes: [
      { match: { account: 'work', peer: 'Alice' }, agent: 'desk' },
      { match: { peer: 'Alice' }, agent: 'personal' },
      { match: { room: '#Ops' }, agent: 'ops' },
    ],
  });

  it('takes the first route whose every field holds, in order, else the channel\'s agent', () => {
    expect(routeOf(routed, { account: 'work', sender: 'alice', kind: 'direct' }, fold)).to.deep.equal({ agent: 'desk', route: 0 });
    expect(routeOf(routed, { account: 'default', sender: 'alice', kind: 'direct' }, fold)).to.deep.equal({ agent: 'personal', route: 1 });
    // A person's route holds in a room too, before the room's.
    expect(routeOf(routed, { account: 'default', sender: 'alice', kind: 'group', room: '#ops' }, fold)).to.deep.equal({ agent: 'personal', route: 1 });
    expect(routeOf(routed, { account: 'default', sender: 'bob', kind: 'group', room: '#ops' }, fold)).to.deep.equal({ agent: 'ops', route: 2 });
    expect(routeOf(routed, { account: 'default', sender: 'bob', kind: 'direct' }, fold)).to.deep.equal({ agent: 'main' });
    // A room route never matches a direct message, even from a peer named like the room.
    expect(routeOf(routed, { account: 'default', sender: '#ops', kind: 'direct' }, fold)).to.deep.equal({ agent: 'main' });
    expect(routeOf(settings({}), { account: 'default', sender: 'bob', kind: 'direct' }, fold)).to.deep.equal({});
  });

  it('keeps the channel\'s own agent in the sessions it always had, and any other agent in its own', () => {
    expect(sessionAgent(routed, { agent: 'main' })).to.equal(undefined);
    expect(sessionAgent(routed, { agent: 'main', route: 3 })).to.equal(undefined);
    expect(sessionAgent(routed, { agent: 'ops', route: 2 })).to.equal('ops');
    expect(sessionAgent(routed, {})).to.equal(undefined);
  });

  it('refuses a route to an unknown agent, or matching no one, naming the route', () => {
    const problems = documentProblems({
      agents: { main: { model: 'a/b' } },
      channels: { irc: { agent: 'main', routes: [{ match: { peer: 'carol' }, agent: 'ghost' }, { match: {}, agent: 'main' }] } },
    });
    expect(problems).to.deep.equal([
      'channels.irc.routes.0 (peer carol -> ghost): there is no agent "ghost" (agents: main); add it first or name another',
      'channels.irc.routes.1 (everyone -> main): a route must match an account, a peer or a room; for everyone else set channels.irc.agent',
    ]);
    expect(documentProblems({ agents: { main: { model: 'a/b', delegation: { agents: ['nobody'] } } } })).to.deep.equal([
      'agents.main.delegation.agents: there is no agent "nobody" (agents: main); add it first or name another',
    ]);
  });
});
