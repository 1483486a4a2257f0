import { ChannelError, sessionView, type ChannelManager } from '../channels/manager.ts';
import type { SessionStore } from '../channels/sessions.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { BuiltinPlugin } from '../plugins/host.ts';
import { ToolError } from './tool-runner.ts';

export interface BuiltinToolDeps {
  queue: JobQueue;
  /** Whether some handler runs jobs of this kind. */
  handles: (kind: string) => boolean;
  sessions: SessionStore;
  channels: ChannelManager;
  status: () => Record<string, unknown>;
  reload: () => Promise<unknown>;
}

const asToolError = (error: unknown): never => {
  if (error instanceof ChannelError) throw new ToolError(error.kind === 'not-found' ? 404 : error.kind === 'invalid' ? 400 : 503, error.message);
  throw error;
};

/** The gateway's own tools, registered through the plugin API like any other. */
export function builtinTools(deps: BuiltinToolDeps): BuiltinPlugin {
  return {
    name: 'gateway-tools',
    register(api) {
      api.tools.add({
        name: 'jobs.enqueue',
        description: 'Queue a job of a kind some handler runs; returns the job.',
        inputSchema: {
          type: 'object',
          additionalProperties: false,
          required: ['kind'],
          properties: {
            kind: { type: 'string', minLength: 1, maxLength: 64 },
            payload: {},
            maxAttempts: { type: 'integer', minimum: 1, maximum: 20 },
            runAt: { type: 'string', format: 'date-time' },
          },
        },
        handler: (args) => {
          const kind = String(args.kind);
          if (!deps.handles(kind)) throw new ToolError(400, `No handler runs jobs of kind ${kind}.`);
          const id = deps.queue.enqueue(kind, args.payload ?? null, {
            source: 'tools',
            ...(args.maxAttempts ? { maxAttempts: Number(args.maxAttempts) } : {}),
            ...(args.runAt ? { runAt: Date.parse(String(args.runAt)) } : {}),
          });
          return deps.queue.get(id);
        },
      });
      api.tools.add({
        name: 'jobs.get',
        description: 'One job: its state, attempts, error and result.',
        inputSchema: { type: 'object', additionalProperties: false, required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 128 } } },
        handler: (args) => {
          const job = deps.queue.get(String(args.id));
          if (!job) throw new ToolError(404, `No job ${String(args.id)}.`);
          return job;
        },
      });
      api.tools.add({
        name: 'sessions.list',
        description: 'Conversations with approved senders and rooms, most recent first.',
        inputSchema: {
          type: 'object',
          additionalProperties: false,
          properties: { channel: { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]{0,31}$' }, limit: { type: 'integer', minimum: 1, maximum: 1000 } },
        },
        handler: (args) => ({
          sessions: deps.sessions.list({ channel: args.channel as string | undefined, limit: Number(args.limit ?? 100) }).map((session) => sessionView(session)),
        }),
      });
      api.tools.add({
        name: 'message.send',
        description: 'Send a message to a peer or room through a channel; it is recorded in the session.',
        inputSchema: {
          type: 'object',
          additionalProperties: false,
          required: ['channel', 'to', 'text'],
          properties: {
            channel: { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]{0,31}$' },
            account: { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]{0,31}$' },
            to: { type: 'string', minLength: 1, maxLength: 64 },
            text: { type: 'string', minLength: 1, maxLength: 4000 },
          },
        },
        handler: async (args, context) => {
          const sent = await deps.channels.send({
            channel: String(args.channel), to: String(args.to), text: String(args.text), via: `tool:${context.caller}`,
            ...(args.account ? { account: String(args.account) } : {}),
          }).catch(asToolError);
          return { sent: true, sessionKey: sent.session.key, messageId: sent.message.id };
        },
      });
      api.tools.add({
        name: 'gateway.status',
        description: 'The gateway\'s profile, version, uptime, channels and plugins.',
        inputSchema: { type: 'object', additionalProperties: false, properties: {} },
        handler: () => deps.status(),
      });
      api.tools.add({
        name: 'gateway.reload',
        description: 'Re-read the configuration and plugins without a restart.',
        inputSchema: { type: 'object', additionalProperties: false, properties: {} },
        dangerous: true,
        handler: () => deps.reload(),
      });
    },
  };
}
