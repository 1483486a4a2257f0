import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { GatewayError, usageError } from '../../shared/errors.ts';
import type { AutomationAction, AutomationSettings, AutomationTrigger } from '../../shared/config/types.ts';

export interface AutomationAddResult {
  profile: string;
  id: string;
  automation: Partial<AutomationSettings>;
  /** How the change applied: through the running daemon (at once) or into config.json (at the next start). */
  via: 'daemon' | 'file';
}

const ID = /^[a-z0-9][a-z0-9_-]{0,31}$/;

/** A delivery target as the flags give it: <channel>[/<account>]:<recipient>. */
function target(flag: string, value: string): { channel: string; account?: string; to: string } {
  const match = /^([a-z0-9][a-z0-9_-]{0,31})(?:\/([a-z0-9][a-z0-9_-]{0,31}))?:(.+)$/.exec(value);
  if (!match) throw usageError(`${flag} takes <channel>[/<account>]:<recipient>, such as irc:#dev or telegram:123456 (got ${JSON.stringify(value)}).`);
  return { channel: match[1]!, ...(match[2] ? { account: match[2] } : {}), to: match[3]! };
}

export default class AutomationsAdd extends BaseCommand<AutomationAddResult> {
  static override summary = 'Add an automation: a trigger (--cron, --every, --at, --webhook, --hook) and an action (--agent with --prompt, or --message).';
  static override description = 'The automation is checked before it is written (the cron expression and time zone, a time in the future, the agent and the channel, the fields the template names) and a running daemon schedules it at once. '
    + 'Templates fill {{path}} from the trigger\'s payload: {{scheduledFor}} for schedules; {{repository}}, {{ref}}, {{sender}} and {{payload.<field>}} for GitHub deliveries; {{payload.<field>}} for hooks.';
  static override examples = [
    '<%= config.bin %> automations add standup --cron "0 9 * * 1-5" --tz Europe/Berlin --agent ops --prompt "Summarise last night\'s failed jobs" --deliver telegram:123456789',
    '<%= config.bin %> automations add review --webhook push --repository org/repo --ref refs/heads/main --agent reviewer --prompt "Summarise {{payload.head_commit.message}}" --deliver irc:#dev',
    '<%= config.bin %> automations add ping --every 15m --message "still here" --to irc:alice',
    '<%= config.bin %> automations add reminder --at 2026-12-24T18:00:00+01:00 --message "Presents!" --to telegram:123456789',
  ];
  static override args = { id: Args.string({ description: 'a name for the automation: lower-case letters, digits, - and _', required: true }) };
  static override flags = {
    cron: Flags.string({ description: 'cron expression: 5 fields, or 6 with seconds first', helpGroup: 'TRIGGER' }),
    tz: Flags.string({ description: 'IANA time zone of --cron (default UTC)', helpGroup: 'TRIGGER', dependsOn: ['cron'] }),
    every: Flags.string({ description: 'interval: 30s, 15m, 2h, 1d', helpGroup: 'TRIGGER' }),
    at: Flags.string({ description: 'one time, ISO 8601 with an offset', helpGroup: 'TRIGGER' }),
    webhook: Flags.string({ description: 'a GitHub event (push, pull_request, ...), optionally with its action: pull_request.opened', helpGroup: 'TRIGGER' }),
    repository: Flags.string({ description: 'with --webhook: only this repository (owner/name)', helpGroup: 'TRIGGER', dependsOn: ['webhook'] }),
    ref: Flags.string({ description: 'with --webhook: only this ref (refs/heads/main)', helpGroup: 'TRIGGER', dependsOn: ['webhook'] }),
    hook: Flags.string({ description: 'a hook name: fires on each POST <hooks.path>/<name>', helpGroup: 'TRIGGER' }),
    agent: Flags.string({ description: 'agent that runs', helpGroup: 'ACTION' }),
    prompt: Flags.string({ description: 'what the agent is asked ({{path}} filled from the trigger)', helpGroup: 'ACTION', dependsOn: ['agent'] }),
    session: Flags.string({ description: '"isolated" (default: a new session each firing) or a session key to continue', helpGroup: 'ACTION', dependsOn: ['agent'] }),
    deliver: Flags.string({ description: 'where the answer goes: <channel>[/<account>]:<recipient>, or "session"', helpGroup: 'ACTION', dependsOn: ['agent'] }),
    message: Flags.string({ description: 'send this text instead of running an agent ({{path}} filled from the trigger)', helpGroup: 'ACTION', exclusive: ['agent'] }),
    to: Flags.string({ description: 'with --message: <channel>[/<account>]:<recipient>', helpGroup: 'ACTION', dependsOn: ['message'] }),
    'catch-up': Flags.option({ description: 'firings missed while no daemon ran: none, the latest, or all (at most 100)', options: ['skip', 'last', 'all'] as const })(),
    description: Flags.string({ description: 'what it is for' }),
    disabled: Flags.boolean({ description: 'add it disabled (gateway automations enable <id> turns it on)' }),
  };

  async run(): Promise<AutomationAddResult> {
    const { args, flags } = await this.parse(AutomationsAdd);
    if (!ID.test(args.id)) throw usageError(`Automation ids are 1-32 lower-case letters, digits, - and _ (got ${JSON.stringify(args.id)}).`);
    const triggers = (['cron', 'every', 'at', 'webhook', 'hook'] as const).filter((name) => flags[name] !== undefined);
    if (triggers.length !== 1) throw usageError(`Give one trigger: --cron, --every, --at, --webhook or --hook (got ${triggers.length ? triggers.map((name) => `--${name}`).join(', ') : 'none'}).`);
    let trigger: AutomationTrigger;
    if (flags.cron !== undefined) trigger = { cron: flags.cron, ...(flags.tz ? { tz: flags.tz } : {}) };
    else if (flags.every !== undefined) trigger = { every: flags.every };
    else if (flags.at !== undefined) trigger = { at: flags.at };
    else if (flags.webhook !== undefined) {
      const [event, action] = flags.webhook.split('.', 2);
      trigger = { webhook: { event: event!, ...(action ? { action } : {}), ...(flags.repository ? { repository: flags.repository } : {}), ...(flags.ref ? { ref: flags.ref } : {}) } };
    } else trigger = { hook: flags.hook! };

    let action: AutomationAction;
    if (flags.message !== undefined) {
      if (!flags.to) throw usageError('--message needs --to <channel>[/<account>]:<recipient>.');
      action = { message: { ...target('--to', flags.to), text: flags.message } };
    } else if (flags.agent !== undefined) {
      if (!flags.prompt) throw usageError('--agent needs --prompt: what the agent is asked.');
      action = {
        agent: flags.agent, prompt: flags.prompt, ...(flags.session ? { session: flags.session } : {}),
        ...(flags.deliver ? { deliver: flags.deliver === 'session' ? 'session' as const : target('--deliver', flags.deliver) } : {}),
      };
    } else throw usageError('Give an action: --agent <id> --prompt <text>, or --message <text> --to <channel>:<recipient>.');

    const automation: Partial<AutomationSettings> = {
      ...(flags.description ? { description: flags.description } : {}),
      ...(flags.disabled ? { enabled: false } : {}),
      trigger, action,
      ...(flags['catch-up'] ? { catchUp: flags['catch-up'] } : {}),
    };
    const profile = this.selectProfile(flags.profile);
    const [{ ensureProfile }, { loadConfig }, { applyConfigChange }] = await Promise.all([
      import('../../shared/profile-setup.ts'), import('../../shared/config/profile-config.ts'), import('../../cli/config-access.ts'),
    ]);
    const setup = await ensureProfile(profile.paths);
    if (setup.warning) this.warning(setup.warning);
    if (loadConfig(profile.paths).effective.automations[args.id]) {
      throw new GatewayError(`Automation ${args.id} exists already.`, { kind: 'conflict', hints: [`gateway automations remove ${args.id}   # then add it again`] });
    }
    const change = await applyConfigChange(profile.paths, `automations.${args.id}`, automation);
    const { describeTrigger } = await import('../../shared/automations.ts');
    this.say(`Added automation ${args.id} (${describeTrigger(trigger)})${change.via === 'daemon' ? '; the daemon scheduled it' : '; it runs once the daemon starts'}.`);
    return { profile: profile.name, id: args.id, automation, via: change.via };
  }
}
