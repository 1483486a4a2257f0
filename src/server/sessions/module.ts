/**
 * Sessions: conversations with their history, shared by channels and agents;
 * every message recorded here is also pushed to operators as session.message.
 */
import { SESSION_SOURCES } from '../../shared/channels.ts';
import type { MessageView, MethodResults } from '../../shared/protocol/results.ts';
import { suggestions } from '../../shared/suggest.ts';
import { DomainError } from '../kernel/errors.ts';
import { defineModule } from '../kernel/module.ts';
import { OPERATOR } from '../kernel/person.ts';
import { inTransaction, type Db } from '../store/database.ts';
import { SESSION_MIGRATIONS } from './migrations.ts';
import { messageView, SessionStore, sessionView, type NewEntry, type NewMessage, type Session, type SessionMessage } from './session-store.ts';

export type { MessageKind, MessageRole, NewEntry, NewMessage, Recall, Session, SessionAddress, SessionMessage, SessionStore } from './session-store.ts';
export { searchWords } from './session-store.ts';
export { messageView, sessionView };

/** What other modules get from this one. */
export interface Sessions {
  store: SessionStore;
  /** Records a message at its address (creating the session) and tells operators. */
  record(message: NewMessage, db?: Db): Promise<{ session: Session; message: SessionMessage }>;
  /** Records a message in a session that exists and tells operators; undefined when there is no such session. */
  append(key: string, entry: NewEntry, db?: Db): Promise<{ session: Session; message: SessionMessage } | undefined>;
  /** Adds what another module knows of a session's messages to its history as shown (a reply's delivery). */
  decorate(decorator: HistoryDecorator): void;
}

/** Adds to a session's history as shown: to its messages (a reply's delivery), or facts of the session beside them (its delegations). */
export type HistoryDecorator = (session: Session, messages: MessageView[]) => Promise<void | Omit<MethodResults['sessions.history'], 'session' | 'messages'>>;

const CHANNEL_ID = { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]{0,31}$' };

export default defineModule<Sessions>({
  id: 'sessions',
  migrations: SESSION_MIGRATIONS,
  setup(ctx) {
    const store = new SessionStore(ctx.store);
    const decorators: HistoryDecorator[] = [];
    // Operators hear of a message once it is in the store: after the commit of the transaction that records it.
    const told = (recorded: { session: Session; message: SessionMessage }, db?: Db) => {
      const tell = () => ctx.events.emit('session.message', { session: sessionView(recorded.session), message: messageView(recorded.message) }, 'operator.read');
      if (db && inTransaction(db)) db.afterCommit(tell);
      else tell();
      return recorded;
    };

    /** A channel's name as pair list takes it: a channel kind the daemon has, one in the config, or where sessions without a channel come from. */
    const assertKnownChannel = (id: string) => {
      const known = [...new Set([...ctx.table().channels.keys(), ...Object.keys(ctx.config().channels), ...SESSION_SOURCES])].sort();
      if (known.includes(id)) return;
      const meant = suggestions(id, known);
      throw new DomainError('not_found', `No channel named ${id}${meant.length ? `; did you mean ${meant.join(' or ')}?` : ''} (channels: ${known.join(', ')}).`);
    };

    ctx.rpc.method({
      name: 'sessions.list',
      handler: async ({ channel, limit }) => {
        const sessions = await store.list({ channel, limit: limit ?? 100 });
        // A misspelt channel is named as such, not answered with an empty list (a channel since removed still lists its sessions).
        if (channel !== undefined && sessions.length === 0) assertKnownChannel(channel);
        return { sessions: await Promise.all(sessions.map(async (session) => sessionView(session, await store.lastMessage(session.key)))) };
      },
    });
    ctx.rpc.method({
      name: 'sessions.history',
      handler: async ({ key, limit, before }) => {
        const session = await store.get(key);
        if (!session) throw new DomainError('not_found', `No session ${key}.`);
        const messages = (await store.history(key, { limit: limit ?? 200, before })).map(messageView);
        let facts = {};
        for (const decorator of decorators) facts = { ...facts, ...(await decorator(session, messages)) };
        return { session: sessionView(session), messages, ...facts };
      },
    });
    ctx.tools.add({
      name: 'sessions.list',
      description: 'Conversations with approved senders, rooms and agents, most recent first.',
      inputSchema: { type: 'object', additionalProperties: false, properties: { channel: CHANNEL_ID, limit: { type: 'integer', minimum: 1, maximum: 1000 } } },
      handler: async (args, context) => {
        // One person's run lists only the conversations that person may recall (who else talks to the agent is theirs to know);
        // an agent whose memory is shared lists those it answered in, as its memory recalls them, never other agents' people.
        // The operator, who reads every session anyway, lists all.
        const operator = context.person === OPERATOR;
        const shared = !operator && context.agent !== undefined && ctx.config().agents[context.agent]?.memory.scope === 'agent';
        const person = operator || shared ? undefined : context.person;
        const channel = args.channel as string | undefined;
        const sessions = await store.list({
          channel, limit: Number(args.limit ?? 100), ...(shared ? { via: `agent:${context.agent}` } : {}), ...(person === undefined ? {} : { person }),
        });
        // A misspelt channel is told to the model as such (with the channels there are), not answered with an empty list.
        if (channel !== undefined && sessions.length === 0) assertKnownChannel(channel);
        return { sessions: sessions.map((session) => sessionView(session)) };
      },
    });

    return {
      store,
      decorate: (decorator) => void decorators.push(decorator),
      record: async (message, db) => told(await store.record(message, db), db),
      append: async (key, entry, db) => {
        const recorded = await store.append(key, entry, db);
        return recorded && told(recorded, db);
      },
    };
  },
});
