/**
 * Automations as the CLI and the daemon both read them: what a trigger's
 * schedule is (its firings, worked out the same way by every daemon sharing a
 * store, so a firing is one key whoever fires it), what a template may name,
 * and what is wrong with an automation before it is written.
 */
import { Cron } from 'croner';
import type { AutomationSettings, AutomationTrigger, GatewayConfig } from './config/types.ts';

/** Firings missed while no daemon ran that catchUp "all" makes up for, at most. */
export const MAX_CATCH_UP = 100;

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
/** The longest interval of `every`: a year. */
const MAX_EVERY_MS = 366 * 86_400_000;

/** An `every` interval in milliseconds, or undefined when it is not one (30s, 15m, 2h, 1d). */
export function everyMs(every: string): number | undefined {
  const match = /^([1-9][0-9]{0,6})(s|m|h|d)$/.exec(every);
  if (!match) return undefined;
  const ms = Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  return ms <= MAX_EVERY_MS ? ms : undefined;
}

export type TriggerKind = 'cron' | 'every' | 'at' | 'webhook' | 'hook';

/** The kinds of trigger an automation names (exactly one is right). */
export function triggerKinds(trigger: AutomationTrigger): TriggerKind[] {
  return (['cron', 'every', 'at', 'webhook', 'hook'] as const).filter((kind) => trigger[kind] !== undefined);
}

/** A trigger that fires on the clock. */
export const isScheduled = (trigger: AutomationTrigger): boolean => trigger.cron !== undefined || trigger.every !== undefined || trigger.at !== undefined;

/**
 * Parsed cron expressions, the most recently used few. A parsed expression
 * holds about 80 KB (croner keeps a table of every year it could fire in), so
 * ten thousand automations keep their expressions as text and parse them
 * again when their next firing is worked out, which takes well under a
 * millisecond.
 */
const parsed = new Map<string, Cron>();
const PARSED_KEPT = 128;
function cronOf(expression: string, zone: string): Cron {
  const key = `${zone}\u0000${expression}`;
  let cron = parsed.get(key);
  if (cron) parsed.delete(key);
  else cron = new Cron(expression, { timezone: zone, paused: true });
  parsed.set(key, cron);
  if (parsed.size > PARSED_KEPT) parsed.delete(parsed.keys().next().value!);
  return cron;
}

/**
 * The clock of a scheduled trigger: its firings after a moment and the latest
 * ones up to a moment. Cron expressions are read by croner in the trigger's
 * time zone (UTC when none): a time that a DST change skips fires at the
 * first moment after the gap, one it repeats fires once.
 */
export class Schedule {
  private readonly expression?: string;
  private readonly zone: string;
  private readonly intervalMs?: number;
  private readonly atMs?: number;

  constructor(trigger: AutomationTrigger) {
    this.zone = trigger.tz ?? 'UTC';
    if (trigger.cron !== undefined) {
      this.expression = trigger.cron;
      cronOf(this.expression, this.zone);
    } else if (trigger.every !== undefined) {
      this.intervalMs = everyMs(trigger.every);
      if (this.intervalMs === undefined) throw new Error(`not an interval: ${trigger.every}`);
    } else if (trigger.at !== undefined) {
      this.atMs = Date.parse(trigger.at);
      if (Number.isNaN(this.atMs)) throw new Error(`not a time: ${trigger.at}`);
    } else throw new Error('not a scheduled trigger');
  }

  /** The first firing strictly after a moment, or undefined when there is none. */
  next(after: number): number | undefined {
    if (this.intervalMs !== undefined) return (Math.floor(after / this.intervalMs) + 1) * this.intervalMs;
    if (this.atMs !== undefined) return this.atMs > after ? this.atMs : undefined;
    return cronOf(this.expression!, this.zone).nextRun(new Date(after))?.getTime();
  }

  /** The latest `count` firings in (since, until], oldest first. */
  latest(since: number, until: number, count: number): number[] {
    if (count <= 0 || until <= since) return [];
    if (this.atMs !== undefined) return this.atMs > since && this.atMs <= until ? [this.atMs] : [];
    if (this.intervalMs !== undefined) {
      const found: number[] = [];
      for (let at = Math.floor(until / this.intervalMs) * this.intervalMs; at > since && found.length < count; at -= this.intervalMs) found.push(at);
      return found.reverse();
    }
    // croner's previousRuns looks back from a moment, excluding it: start a millisecond after `until`.
    return cronOf(this.expression!, this.zone).previousRuns(count, new Date(until + 1)).map((date) => date.getTime()).filter((at) => at > since && at <= until).sort((a, b) => a - b);
  }
}

/** What a trigger's payload holds at its top level: a template's {{path}} starts with one of these. */
export function payloadFields(trigger: AutomationTrigger): string[] {
  if (trigger.webhook) return ['automation', 'firedBy', 'scheduledFor', 'event', 'action', 'delivery', 'repository', 'ref', 'sender', 'payload'];
  if (trigger.hook) return ['automation', 'firedBy', 'scheduledFor', 'hook', 'payload'];
  return ['automation', 'firedBy', 'scheduledFor'];
}

/**
 * The top-level fields of GitHub's payloads of the commonest events (from
 * GitHub's webhook schemas): a template reaching into `payload.` of such a
 * delivery is checked against them.
 */
const COMMON_FIELDS = ['action', 'sender', 'repository', 'organization', 'installation', 'enterprise'];
const GITHUB_FIELDS: Record<string, readonly string[]> = {
  push: ['ref', 'before', 'after', 'created', 'deleted', 'forced', 'base_ref', 'compare', 'commits', 'head_commit', 'pusher'],
  pull_request: ['number', 'pull_request', 'assignee', 'label', 'requested_reviewer', 'requested_team', 'changes', 'before', 'after'],
  issues: ['issue', 'assignee', 'label', 'milestone', 'changes'],
  issue_comment: ['issue', 'comment', 'changes'],
  release: ['release', 'changes'],
  workflow_run: ['workflow_run', 'workflow'],
  create: ['ref', 'ref_type', 'master_branch', 'description', 'pusher_type'],
  delete: ['ref', 'ref_type', 'pusher_type'],
  star: ['starred_at'],
  ping: ['zen', 'hook_id', 'hook'],
};

const FIELD_REFERENCE = /\{\{\s*([A-Za-z0-9_$-]+(?:\.[A-Za-z0-9_$-]+)*)\s*\}\}/g;

/** The {{paths}} a template names. */
export const templateFields = (template: string): string[] => [...template.matchAll(FIELD_REFERENCE)].map((match) => match[1]!);

/** Fields a template names that a trigger's payload cannot hold. */
export function missingFields(template: string, trigger: AutomationTrigger): string[] {
  const roots = payloadFields(trigger);
  const known = trigger.webhook ? GITHUB_FIELDS[trigger.webhook.event] : undefined;
  return templateFields(template).filter((path) => {
    const [root, first] = path.split('.');
    if (!roots.includes(root!)) return true;
    return root === 'payload' && known !== undefined && first !== undefined && !known.includes(first) && !COMMON_FIELDS.includes(first);
  });
}

const SESSION_KEY = /^[^\s:]{1,64}:[^\s:]{1,64}:(dm|group):\S{1,300}$/;

/**
 * What is wrong with each automation, "automations.<id>...: why", for a
 * configuration about to be written. Callers refuse only problems the change
 * brings (an `at` that was set in the future and has since passed is no
 * longer the user's doing).
 */
export function automationProblems(config: GatewayConfig, now = Date.now()): string[] {
  return Object.entries(config.automations ?? {}).flatMap(([id, automation]) => problemsOf(`automations.${id}`, automation, config, now));
}

function problemsOf(key: string, automation: AutomationSettings, config: GatewayConfig, now: number): string[] {
  const problems: string[] = [];
  const { trigger, action } = automation;
  const kinds = triggerKinds(trigger);
  if (kinds.length !== 1) problems.push(`${key}.trigger: name exactly one of cron, every, at, webhook, hook (got ${kinds.length ? kinds.join(', ') : 'none'})`);
  if (trigger.tz !== undefined && trigger.cron === undefined) problems.push(`${key}.trigger.tz: a time zone goes with a cron expression`);
  if (trigger.tz !== undefined && !validZone(trigger.tz)) problems.push(`${key}.trigger.tz: ${trigger.tz} is not an IANA time zone (such as Europe/Berlin)`);
  else if (trigger.cron !== undefined) {
    const why = cronProblem(trigger.cron, trigger.tz ?? 'UTC', now);
    if (why) problems.push(`${key}.trigger.cron: "${trigger.cron}" ${why}`);
  }
  if (trigger.every !== undefined && everyMs(trigger.every) === undefined) problems.push(`${key}.trigger.every: ${trigger.every} is longer than a year`);
  if (trigger.at !== undefined) {
    const at = Date.parse(trigger.at);
    if (Number.isNaN(at)) problems.push(`${key}.trigger.at: ${trigger.at} is not a time`);
    else if (at <= now) problems.push(`${key}.trigger.at: ${trigger.at} is in the past`);
  }

  const agents = Object.keys(config.agents);
  const channels = Object.keys(config.channels);
  const channelProblem = (where: string, channel: string) => (config.channels[channel] ? [] : [`${where}: no channel ${channel} is configured (channels: ${channels.join(', ') || 'none'})`]);
  const templateProblem = (where: string, template: string) => {
    const missing = missingFields(template, trigger);
    return missing.length ? [`${where}: the template names ${missing.map((field) => `{{${field}}}`).join(', ')}, which the trigger's payload does not hold (it holds ${payloadFields(trigger).join(', ')})`] : [];
  };
  if ((action.agent === undefined) === (action.message === undefined)) {
    problems.push(`${key}.action: name either an agent (with a prompt) or a message`);
    return problems;
  }
  if (action.message) {
    problems.push(...channelProblem(`${key}.action.message.channel`, action.message.channel), ...templateProblem(`${key}.action.message.text`, action.message.text));
    for (const field of ['prompt', 'session', 'deliver'] as const) if (action[field] !== undefined) problems.push(`${key}.action.${field}: goes with an agent, not a message`);
    return problems;
  }
  if (!config.agents[action.agent!]) problems.push(`${key}.action.agent: no agent ${action.agent} (agents: ${agents.join(', ') || 'none'})`);
  if (action.prompt === undefined) problems.push(`${key}.action.prompt: an agent needs a prompt`);
  else problems.push(...templateProblem(`${key}.action.prompt`, action.prompt));
  const session = action.session ?? 'isolated';
  if (session !== 'isolated' && !SESSION_KEY.test(session)) problems.push(`${key}.action.session: "isolated" or a session key such as irc:default:dm:alice (gateway sessions list)`);
  if (action.deliver === 'session' && session === 'isolated') problems.push(`${key}.action.deliver: "session" delivers to the channel of action.session, which is isolated here; name a session or a {channel, to}`);
  if (action.deliver === 'session' && session !== 'isolated' && !config.channels[session.split(':')[0]!]) {
    problems.push(...channelProblem(`${key}.action.deliver`, session.split(':')[0]!));
  }
  if (typeof action.deliver === 'object') problems.push(...channelProblem(`${key}.action.deliver.channel`, action.deliver.channel));
  return problems;
}

/** What is wrong with a cron expression, remembered: a configuration of thousands is checked at each change. */
const cronProblems = new Map<string, string>();
function cronProblem(expression: string, zone: string, now: number): string {
  const key = `${zone}\u0000${expression}`;
  let why = cronProblems.get(key);
  if (why === undefined) {
    try {
      why = new Schedule({ cron: expression, tz: zone }).next(now) === undefined ? 'never fires' : '';
    } catch (error) {
      why = `is not a cron expression (${String((error as Error).message).replace(/^CronPattern: /, '')})`;
    }
    if (cronProblems.size >= 50_000) cronProblems.clear();
    cronProblems.set(key, why);
  }
  return why;
}

const zones = new Set<string>();
function validZone(zone: string): boolean {
  if (zones.has(zone)) return true;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    zones.add(zone);
    return true;
  } catch {
    return false;
  }
}

/** A trigger in a few words: "cron 0 9 * * 1-5 (Europe/Berlin)", "every 15m", "webhook push acme/widgets". */
export function describeTrigger(trigger: AutomationTrigger): string {
  if (trigger.cron !== undefined) return `cron ${trigger.cron}${trigger.tz ? ` (${trigger.tz})` : ''}`;
  if (trigger.every !== undefined) return `every ${trigger.every}`;
  if (trigger.at !== undefined) return `at ${trigger.at}`;
  if (trigger.webhook) {
    const { event, action, repository, ref } = trigger.webhook;
    return ['webhook', action ? `${event}.${action}` : event, repository, ref].filter(Boolean).join(' ');
  }
  return `hook ${trigger.hook}`;
}
