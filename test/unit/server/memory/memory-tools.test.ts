import { expect } from 'chai';
import pino from 'pino';
import type { AgentSettings } from '../../../../src/shared/config/types.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import type { ToolContext, ToolDef } from '../../../../src/server/kernel/module.ts';
import { memoryOf, memoryTools, RECALLED } from '../../../../src/server/memory/memory-tools.ts';
import { Notes } from '../../../../src/server/memory/notes.ts';
import { SessionStore } from '../../../../src/server/sessions/session-store.ts';
import { freshStore } from '../../../support/store.ts';

const agentSettings = (scope: 'person' | 'agent') => ({ memory: { scope } }) as AgentSettings;
const agents: Record<string, AgentSettings> = { helper: agentSettings('person'), shared: agentSettings('agent'), other: agentSettings('person') };
const resolve = (agentId?: string) => {
  const id = agentId ?? 'helper';
  if (!agents[id]) throw new DomainError('not_found', `No agent ${id}.`);
  return { id, settings: agents[id]! };
};
const call = (person: string, over: Partial<ToolContext> = {}): ToolContext => ({ caller: 'agent:helper', surface: 'agent', agent: 'helper', person, sessionKey: 'irc:main:dm:ann', logger: pino({ level: 'silent' }), ...over });

describe('memory: each person\'s notes and conversations', () => {
  const store = freshStore();
  let tools: Record<string, ToolDef>;
  let sessions: SessionStore;
  beforeEach(() => {
    sessions = new SessionStore(store());
    tools = Object.fromEntries(memoryTools({ resolve, sessions, notes: new Notes(store()) }).map((tool) => [tool.name, tool]));
  });
  const use = (tool: string, args: Record<string, unknown>, context: ToolContext) => tools[tool]!.handler(args, context) as Promise<any>;

  it('a call\'s memory is its agent\'s, and the person\'s it acts for unless the agent shares one', () => {
    expect(memoryOf(resolve, { agent: 'helper', person: 'peer:irc:main:ann' })).to.deep.equal({ agent: 'helper', person: 'peer:irc:main:ann' });
    expect(memoryOf(resolve, { agent: 'shared', person: 'peer:irc:main:ann' })).to.deep.equal({ agent: 'shared' });
    expect(memoryOf(resolve, { person: 'operator' }), 'over HTTP: the default agent').to.deep.equal({ agent: 'helper', person: 'operator' });
  });

  it('keeps a note for the person, finds it for them only, and reads it whole, framed as quoted data', async () => {
    const ann = call('peer:irc:main:ann');
    const bob = call('peer:irc:main:bob');
    const kept = await use('memory.note', { text: '  Ann prefers tea over coffee  ' }, ann);
    expect(kept).to.deep.include({ agent: 'helper', kept: true });
    const found = await use('memory.search', { query: 'tea' }, ann);
    expect(found.about).to.equal(RECALLED);
    expect(found.results.map((result: any) => [result.id, result.kind])).to.deep.equal([[kept.id, 'note']]);
    expect((await use('memory.search', { query: 'tea' }, bob)).results).to.deep.equal([]);
    const whole = await use('memory.get', { id: kept.id }, ann);
    expect(whole).to.include({ about: RECALLED, text: 'Ann prefers tea over coffee', sessionKey: 'irc:main:dm:ann', kind: 'note' });
    const hidden = await use('memory.get', { id: kept.id }, bob).catch((error: unknown) => error);
    expect(hidden).to.be.instanceOf(DomainError).with.property('message', `No note ${kept.id} in this memory.`);
  });

  it('an agent that shares its memory finds every person\'s notes; another agent finds none', async () => {
    const kept = await use('memory.note', { text: 'the deploy key rotates on Fridays' }, call('peer:irc:main:ann', { agent: 'shared' }));
    expect((await use('memory.search', { query: 'deploy Fridays' }, call('peer:irc:main:bob', { agent: 'shared' }))).results.map((result: any) => result.id)).to.deep.equal([kept.id]);
    expect((await use('memory.search', { query: 'deploy' }, call('peer:irc:main:ann', { agent: 'other' }))).results).to.deep.equal([]);
  });

  it('finds the person\'s conversations after the notes, and reads a message with those around it', async () => {
    const address = { channel: 'irc', account: 'main', kind: 'direct' as const, peer: 'ann' };
    const key = await sessions.ensure(address, 1);
    const at = Date.parse('2026-01-01T00:00:00Z');
    await sessions.append(key, { direction: 'in', sender: 'ann', text: 'hello there', at, role: 'user', person: 'peer:irc:main:ann' });
    const asked = await sessions.append(key, { direction: 'in', sender: 'ann', text: 'my flight lands at nine', at: at + 1, role: 'user', person: 'peer:irc:main:ann' });
    await sessions.append(key, { direction: 'out', sender: 'helper', text: 'I will remember the flight.', at: at + 2, role: 'assistant', via: 'agent:helper' });
    await use('memory.note', { text: 'flight number LH 123' }, call('peer:irc:main:ann'));
    const found = await use('memory.search', { query: 'flight', limit: 5 }, call('peer:irc:main:ann'));
    expect(found.results[0].kind).to.equal('note');
    expect(found.results.filter((result: any) => result.kind === 'message').map((result: any) => result.sessionKey)).to.include(key);
    const message = await use('memory.get', { id: `message:${asked!.message.id}` }, call('peer:irc:main:ann'));
    expect(message).to.include({ text: 'my flight lands at nine', sender: 'ann', kind: 'message' });
    expect(message.before.map((one: any) => one.text)).to.deep.equal(['hello there']);
    expect(message.after.map((one: any) => one.text)).to.deep.equal(['I will remember the flight.']);
    const other = await use('memory.get', { id: `message:${asked!.message.id}` }, call('peer:irc:main:bob')).catch((error: unknown) => error);
    expect(other).to.be.instanceOf(DomainError).with.property('status', 404);
  });

  it('refuses a query without words and a note without text', async () => {
    expect(await use('memory.search', { query: '!!! ...' }, call('operator')).catch((error: unknown) => (error as Error).message)).to.equal('The query has no words to search for.');
    expect(await use('memory.note', { text: '   ' }, call('operator')).catch((error: unknown) => (error as Error).message)).to.equal('A note needs some text.');
  });
});
