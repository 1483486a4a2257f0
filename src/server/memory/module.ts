/**
 * An agent's memory: memory.search over its conversations (the sessions it
 * answered in) and the notes it kept, memory.get of one of them whole, and
 * memory.note to keep something. Full-text search is the store's own: SQLite
 * FTS5, PostgreSQL's text search on a shared store.
 *
 * Memory is the person's (src/server/kernel/person.ts): a call reads the
 * notes kept for the person it acts for and the sessions that person may
 * recall, never another person's, unless the agent's memory is shared
 * (agents.<id>.memory.scope agent). An agent never reads another agent's.
 * Over HTTP and the WebSocket the tools act as the default agent, for the
 * caller. What is recalled goes back framed as quoted data, never as
 * instructions. The tools are in memory-tools.ts, the notes in notes.ts.
 */
import agentsModule from '../agents/module.ts';
import { defineModule } from '../kernel/module.ts';
import sessionsModule from '../sessions/module.ts';
import { memoryTools } from './memory-tools.ts';
import { MEMORY_MIGRATIONS, Notes } from './notes.ts';

export { RECALLED } from './memory-tools.ts';

export default defineModule({
  id: 'memory',
  needs: [agentsModule, sessionsModule],
  migrations: MEMORY_MIGRATIONS,
  setup(ctx) {
    const agents = ctx.use(agentsModule);
    const tools = memoryTools({ resolve: (agentId) => agents.resolve(agentId), sessions: ctx.use(sessionsModule).store, notes: new Notes(ctx.store) });
    for (const tool of tools) ctx.tools.add(tool);
  },
});
