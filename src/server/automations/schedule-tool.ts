/**
 * The automations.add tool: an agent schedules a prompt for its user, at a
 * time or on a cron expression, answered in the session it was asked in.
 * The automation is written to the profile's configuration as
 * `gateway config set` would, then put on the clock.
 */
import { randomUUID } from 'node:crypto';
import { describeTrigger } from '../../shared/automations.ts';
import { changeConfigKeys, loadConfig } from '../../shared/config/profile-config.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';
import { DomainError } from '../kernel/errors.ts';
import type { DaemonView, ToolDef } from '../kernel/module.ts';
import type { Sessions } from '../sessions/module.ts';
import type { AuditFields } from '../store/database.ts';
import type { AutomationClock } from './clock.ts';
import { iso } from './triggers.ts';

export interface ScheduleToolDeps {
  config: () => GatewayConfig;
  daemon: Pick<DaemonView, 'paths' | 'configProblems' | 'applyConfig'>;
  sessions: Pick<Sessions['store'], 'get'>;
  audit: (kind: string, fields: AuditFields) => Promise<void>;
  clock: Pick<AutomationClock, 'sync' | 'nextOf'>;
}

export function scheduleTool(deps: ScheduleToolDeps): ToolDef {
  return {
    name: 'automations.add',
    description: 'Schedule a prompt for yourself: at a time (at, ISO 8601 with an offset) or on a cron expression (cron, with tz); the answer comes back in this conversation.',
    inputSchema: {
      type: 'object', additionalProperties: false, required: ['prompt'],
      properties: {
        prompt: { type: 'string', minLength: 1, maxLength: 4000 },
        at: { type: 'string', format: 'date-time' },
        cron: { type: 'string', minLength: 1, maxLength: 200 },
        tz: { type: 'string', minLength: 1, maxLength: 64 },
        description: { type: 'string', maxLength: 500 },
      },
    },
    handler: async (args, context) => {
      if (context.surface !== 'agent' || !context.sessionKey) throw new DomainError('forbidden', 'automations.add schedules for an agent\'s conversation; call it from an agent run.');
      const session = await deps.sessions.get(context.sessionKey);
      const agentId = context.agent;
      if (!session || !agentId) throw new DomainError('forbidden', 'automations.add needs the agent and the session it is called from.');
      if ((args.at === undefined) === (args.cron === undefined)) throw new DomainError('invalid', 'Give either at (one time) or cron (a repeating schedule).');
      const id = `${agentId.slice(0, 12)}-${Date.now().toString(36)}${randomUUID().slice(0, 4)}`;
      const deliverable = Boolean(deps.config().channels[session.channel]);
      const settings = {
        ...(args.description ? { description: String(args.description) } : {}),
        trigger: args.at !== undefined ? { at: String(args.at) } : { cron: String(args.cron), ...(args.tz ? { tz: String(args.tz) } : {}) },
        action: { agent: agentId, prompt: String(args.prompt), session: context.sessionKey, ...(deliverable ? { deliver: 'session' } : {}) },
      };
      const key = `automations.${id}`;
      // Refused for the problems it would add, not for those the configuration has already.
      const before = new Set(deps.daemon.configProblems(deps.config()));
      const [change] = await changeConfigKeys(deps.daemon.paths, [{ key, value: settings }], { check: (next) => deps.daemon.configProblems(next).filter((problem) => !before.has(problem)) });
      if (!change?.remainingProblems) deps.daemon.applyConfig(loadConfig(deps.daemon.paths).effective);
      await deps.audit('config.changed', { actor: context.caller, subject: key });
      await deps.clock.sync(deps.config());
      return { automation: id, when: describeTrigger(settings.trigger), nextAt: iso(deps.clock.nextOf(id)) };
    },
  };
}
