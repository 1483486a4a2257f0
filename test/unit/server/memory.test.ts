import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OPERATOR } from '../../../src/server/kernel/person.ts';
import memoryModule from '../../../src/server/memory/module.ts';
import { SESSION_MIGRATIONS } from '../../../src/server/sessions/migrations.ts';
import { SessionStore } from '../../../src/server/sessions/session-store.ts';
import { Store } from '../../../src/server/store/database.ts';
import { freePort } from '../../support/cli.ts';
import { sharedPostgres } from '../../support/postgres.ts';

for (const engine of ['sqlite', 'postgres'] as const) describe(`what a person's memory recalls (${engine})`, () => {
  let dir: string;
  let store: Store;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gateway-memory-'));
    const url = engine === 'postgres' ? (await sharedPostgres(freePort)).createDatabase() : undefined;
    store = await Store.open({ path: join(dir, 'state.db'), synchronous: 'normal', url });
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('turns and notes kept before memory was each person\'s are given to the person their session tells, and to no one where it does not tell', async () => {
    const migrations = (sessions: number, memory: number) => [
      { module: 'sessions', migrations: SESSION_MIGRATIONS.slice(0, sessions) },
      { module: 'memory', migrations: memoryModule.migrations!.slice(0, memory) },
    ];
    await store.migrate(migrations(4, 1));
    const session = (key: string, channel: string, kind: string, peer: string) => store.run(`INSERT INTO sessions (key, channel, account, kind, peer, created_at, updated_at, message_count)
      VALUES (?, ?, ?, ?, ?, 1, 1, 0)`, key, channel, key.split(':')[1], kind, peer);
    const message = async (key: string, fields: { direction: 'in' | 'out'; sender: string; text: string; role?: string; kind?: string; via?: string }) =>
      Number((await store.get<{ id: number }>('INSERT INTO session_messages (session_key, direction, sender, text, at, via, role, kind) VALUES (?, ?, ?, ?, 1, ?, ?, ?) RETURNING id',
        key, fields.direction, fields.sender, fields.text, fields.via ?? null, fields.role ?? null, fields.kind ?? null))!.id);
    const note = async (key: string | null, text: string) =>
      Number((await store.get<{ id: number }>('INSERT INTO memory_notes (agent, session_key, text, created_at) VALUES (?, ?, ?, 1) RETURNING id', 'helper', key, text))!.id);
    const agent = { direction: 'out' as const, sender: 'helper', via: 'agent:helper', role: 'assistant', kind: 'message', text: 'Noted.' };

    const dm = 'telegram:default:dm:111';
    const thread = 'email:default:dm:ann@example.org#t1';
    const room = 'telegram:default:group:-100';
    const api = 'api:helper:dm:gateway/x';
    const chat = 'chat:helper:dm:cli';
    const matrix = 'matrix:dm:dm:@ann:dm.example.org';
    await session(dm, 'telegram', 'direct', '111');
    await session(matrix, 'matrix', 'direct', '@ann:dm.example.org');
    await session(thread, 'email', 'direct', 'ann@example.org#t1');
    await session(room, 'telegram', 'group', '-100');
    await session(api, 'api', 'direct', 'gateway/x');
    await session(chat, 'chat', 'direct', 'cli');
    const said = {
      dm: await message(dm, { direction: 'in', sender: '111', text: 'my locker code is 7731' }),
      thread: await message(thread, { direction: 'in', sender: 'ann@example.org', text: 'the invoice is attached' }),
      room111: await message(room, { direction: 'in', sender: '111', text: 'the boat leaves at noon' }),
      room222: await message(room, { direction: 'in', sender: '222', text: 'noon suits me' }),
      api: await message(api, { direction: 'in', sender: 'gateway', role: 'user', kind: 'message', text: 'my locker is 12' }),
      chat: await message(chat, { direction: 'in', sender: 'device:abc', role: 'user', kind: 'message', text: 'the locker at work' }),
    };
    const steps = [
      await message(dm, agent),
      await message(dm, { direction: 'in', sender: 'memory.note', role: 'tool', kind: 'tool_result', text: '' }),
      await message(room, agent),
      await message(api, agent),
      await message(chat, agent),
    ];
    const notes = {
      dm: await note(dm, 'PIN 9911'), thread: await note(thread, 'Ann pays on Fridays'), room: await note(room, 'the crew sails at noon'),
      api: await note(api, 'locker 12'), chat: await note(chat, 'the work locker'), none: await note(null, 'kept over HTTP'),
      matrix: await note(matrix, 'Ann reads on Sundays'),
    };

    await store.migrate(migrations(SESSION_MIGRATIONS.length, memoryModule.migrations!.length));
    const personOf = async (table: string, id: number) => (await store.get<{ person: string | null }>(`SELECT person FROM ${table} WHERE id = ?`, id))!.person;
    expect(await personOf('session_messages', said.dm)).to.equal('peer:telegram:default:111');
    expect(await personOf('session_messages', said.thread), 'an email thread\'s is its sender\'s').to.equal('peer:email:default:ann@example.org');
    expect(await personOf('session_messages', said.room111)).to.equal('peer:telegram:default:111');
    expect(await personOf('session_messages', said.room222)).to.equal('peer:telegram:default:222');
    expect(await personOf('session_messages', said.api), 'an API turn named no user').to.equal(null);
    expect(await personOf('session_messages', said.chat)).to.equal(OPERATOR);
    for (const id of steps) expect(await personOf('session_messages', id)).to.equal(null);

    // A note's person is read from its session key: a channel's DM names its peer, `gateway chat` the operator.
    expect(await personOf('memory_notes', notes.dm)).to.equal('peer:telegram:default:111');
    expect(await personOf('memory_notes', notes.chat)).to.equal(OPERATOR);
    expect(await personOf('memory_notes', notes.matrix), 'an account named dm, a sender with colons').to.equal('peer:matrix:dm:@ann:dm.example.org');
    for (const id of [notes.thread, notes.room, notes.api, notes.none]) expect(await personOf('memory_notes', id), 'no one person to give it to').to.equal(null);

    // What the sessions now tell: the DM is its peer's; the room is its members'; the API session and its words are no one's.
    const sessions = new SessionStore(store);
    const found = async (query: string, person?: string) => (await sessions.search(query, { via: 'agent:helper', ...(person ? { person } : {}) }, 10)).map((one) => one.id);
    expect(await found('locker', 'peer:telegram:default:111')).to.deep.equal([said.dm]);
    expect(await found('locker', 'peer:telegram:default:222')).to.deep.equal([]);
    expect(await found('noon', 'peer:telegram:default:222')).to.have.members([said.room111, said.room222]);
    expect(await found('locker', OPERATOR)).to.deep.equal([said.chat]);
    expect(await found('locker'), 'an agent whose memory is shared finds every one').to.have.members([said.dm, said.api, said.chat]);
    expect(await sessions.recalls(api, { via: 'agent:helper', person: 'user:gateway:x' })).to.equal(false);
    expect(await sessions.recalls(api, { via: 'agent:helper' })).to.equal(true);
  });

  it('a direct session two people spoke in is recalled by neither, a room by both', async () => {
    await store.migrate([{ module: 'sessions', migrations: SESSION_MIGRATIONS }]);
    const sessions = new SessionStore(store);
    const say = (kind: 'direct' | 'group', peer: string, person: string, text: string) =>
      sessions.record({ channel: 'api', account: 'helper', kind, peer, direction: 'in', sender: person, person, text, at: 1, via: 'agent:helper' });
    await say('direct', 'gateway/shared', 'user:gateway:alice', 'the boat is called Seraphina');
    const recall = (person: string) => ({ via: 'agent:helper', person });
    expect(await sessions.search('Seraphina', recall('user:gateway:alice'), 10)).to.have.length(1);
    await say('direct', 'gateway/shared', 'user:gateway:bob', 'hello');
    expect(await sessions.search('Seraphina', recall('user:gateway:alice'), 10)).to.deep.equal([]);
    expect(await sessions.search('Seraphina', recall('user:gateway:bob'), 10)).to.deep.equal([]);
    expect(await sessions.recalls('api:helper:dm:gateway/shared', recall('user:gateway:alice'))).to.equal(false);

    await say('group', 'crew', 'user:gateway:alice', 'the ferry is at noon');
    await say('group', 'crew', 'user:gateway:bob', 'thanks');
    expect(await sessions.search('ferry', recall('user:gateway:bob'), 10)).to.have.length(1);
    expect(await sessions.search('ferry', recall('user:gateway:carol'), 10), 'not to someone who never spoke there').to.deep.equal([]);
  });
});
