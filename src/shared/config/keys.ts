import type { ErrorObject } from 'ajv';
import { createRequire } from 'node:module';
import type validateConfig from './config-validator.generated.cjs';
import { usageError } from '../errors.ts';
import { configSchema, LIVE_KEY_PATTERNS, LIVE_KEYS, READ_ONLY_KEYS, RELOAD_KEYS, type SchemaNode } from './schema.ts';
import type { ChannelRoute, GatewayConfig } from './types.ts';

/**
 * The compiled validator (about 220 KB of generated code), loaded at its first
 * use: a command that only reads the settings (`gateway status` beside a
 * running daemon) does not pay for it.
 */
let loaded: typeof validateConfig | undefined;
const validator = (): typeof validateConfig => (loaded ??= createRequire(import.meta.url)('./config-validator.generated.cjs') as typeof validateConfig);

/** Splits a dotted key, refusing empty segments. */
export function splitKey(key: string): string[] {
  const parts = key.split('.');
  if (key.length === 0 || parts.some((part) => part.length === 0)) {
    throw usageError(`Invalid configuration key ${JSON.stringify(key)}: use dotted names such as gateway.port.`, ['gateway config list']);
  }
  return parts;
}

/** The schema of a dotted key, or undefined when the key is not a setting. */
export function schemaAt(key: string): SchemaNode | undefined {
  let node: SchemaNode | undefined = configSchema;
  for (const part of splitKey(key)) {
    if (!node || node.type !== 'object') return undefined;
    const named: SchemaNode | undefined = node.properties?.[part];
    if (named) {
      node = named;
    } else if (typeof node.additionalProperties === 'object') {
      if (node.propertyNames?.pattern && !new RegExp(node.propertyNames.pattern).test(part)) return undefined;
      node = node.additionalProperties;
    } else {
      return undefined;
    }
  }
  return node;
}

export function assertKnownKey(key: string): SchemaNode {
  const node = schemaAt(key);
  if (!node) {
    throw usageError(`Unknown configuration key ${JSON.stringify(key)}.`, ['gateway config list   # shows every key and its value']);
  }
  return node;
}

export function assertWritableKey(key: string): SchemaNode {
  const node = assertKnownKey(key);
  for (const [readOnly, why] of Object.entries(READ_ONLY_KEYS)) {
    if (key === readOnly || key.startsWith(`${readOnly}.`) || readOnly.startsWith(`${key}.`)) {
      throw usageError(`${readOnly} cannot be changed: ${why}.`);
    }
  }
  return node;
}

/** A command-line value: JSON where it parses (numbers, booleans, arrays, objects), else the text itself. */
export function parseValue(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

function describe(errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((error) => {
    const where = error.instancePath.split('/').filter(Boolean).join('.') || '(root)';
    switch (error.keyword) {
      case 'additionalProperties':
        return `${where === '(root)' ? '' : `${where}.`}${String(error.params.additionalProperty)}: unknown key`;
      case 'enum':
        return `${where}: must be one of ${(error.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
      case 'anyOf':
        return '';
      default:
        return `${where}: ${error.message ?? 'is invalid'}`;
    }
  }).filter((line, index, all) => line && all.indexOf(line) === index);
}

function schemaProblems(document: unknown): string[] {
  const validate = validator();
  return validate(document) ? [] : describe(validate.errors);
}

/** A route's match as people read it: "peer alice, room #ops". */
export const describeMatch = (match: ChannelRoute['match']): string =>
  Object.entries(match).map(([field, value]) => `${field} ${String(value)}`).join(', ') || 'everyone';

/** Rules that span keys, which the schema cannot say. */
function ruleProblems(document: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const channels = (document.channels ?? {}) as Record<string, { dmPolicy?: string; allowFrom?: string[]; routes?: ChannelRoute[] }>;
  const agents = Object.keys((document.agents ?? {}) as Record<string, unknown>);
  const unknownAgent = (agent: string) => `there is no agent ${JSON.stringify(agent)} (agents: ${agents.join(', ') || 'none'}); add it first or name another`;
  for (const [id, channel] of Object.entries(channels)) {
    if (channel.dmPolicy === 'open' && !(channel.allowFrom ?? []).includes('*')) {
      problems.push(`channels.${id}.dmPolicy: "open" lets anyone write to the gateway, so it needs an explicit "*" in channels.${id}.allowFrom`);
    }
    (channel.routes ?? []).forEach((route, index) => {
      const where = `channels.${id}.routes.${index} (${describeMatch(route.match)} -> ${route.agent})`;
      if (Object.keys(route.match).length === 0) problems.push(`${where}: a route must match an account, a peer or a room; for everyone else set channels.${id}.agent`);
      if (!agents.includes(route.agent)) problems.push(`${where}: ${unknownAgent(route.agent)}`);
    });
  }
  for (const [id, agent] of Object.entries((document.agents ?? {}) as Record<string, { delegation?: { agents?: string[] } }>)) {
    for (const target of agent.delegation?.agents ?? []) {
      if (!agents.includes(target)) problems.push(`agents.${id}.delegation.agents: ${unknownAgent(target)}`);
    }
  }
  const hooks = (document.hooks ?? {}) as { mappings?: { name: string; action: string; text?: string; channel?: string; to?: string }[] };
  (hooks.mappings ?? []).forEach((mapping, index) => {
    const where = `hooks.mappings.${index} (${mapping.name})`;
    if (mapping.action === 'message' && mapping.text === undefined) problems.push(`${where}: a message mapping needs text`);
    if ((mapping.channel === undefined) !== (mapping.to === undefined)) problems.push(`${where}: channel and to go together`);
  });
  return problems;
}

/** The key a problem names ("gateway.port: must be integer", "hooks.mappings.0 (name): ..."). */
export const keyOfProblem = (problem: string): string => problem.split(':')[0]!.split(' ')[0]!;

/** Problems of a whole config document, each naming its key; empty when valid. */
export function documentProblems(document: unknown): string[] {
  const problems = schemaProblems(document);
  return problems.length > 0 ? problems : ruleProblems(document as Record<string, unknown>);
}

/** Problems of a value for a key, each naming the key; empty when valid. */
export function problemsOf(key: string, value: unknown): string[] {
  if (key === '') return documentProblems(value);
  assertKnownKey(key);
  // A document holding only this key checks exactly it, but for what the containers made around it lack (the url of
  // mcp.servers.<name> when the key is mcp.servers.<name>.timeoutMs): the whole document, checked next, has those.
  const validate = validator();
  if (validate(setPath({}, key, value))) return [];
  const depth = splitKey(key).length;
  return describe((validate.errors ?? []).filter((error) => !(error.keyword === 'required' && error.instancePath.split('/').filter(Boolean).length < depth)));
}

export function assertValidValue(key: string, value: unknown): void {
  const problems = problemsOf(key, value);
  if (problems.length > 0) {
    throw usageError(`Invalid setting: ${problems.join("; ")}.`, [`gateway config get ${key}   # shows the current value`]);
  }
}

export function getPath(source: unknown, key: string): unknown {
  let node: unknown = source;
  for (const part of splitKey(key)) {
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, part)) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

/** Sets a dotted key in a plain object, creating containers; returns the object. */
export function setPath(target: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
  const parts = splitKey(key);
  let node = target;
  for (const part of parts.slice(0, -1)) {
    const next = node[part];
    if (next === null || typeof next !== 'object' || Array.isArray(next)) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[parts.at(-1)!] = value;
  return target;
}

/** Removes a dotted key and any containers it leaves empty; returns whether it was set. */
export function deletePath(target: Record<string, unknown>, key: string): boolean {
  const parts = splitKey(key);
  const chain: Record<string, unknown>[] = [target];
  for (const part of parts.slice(0, -1)) {
    const next = chain.at(-1)![part];
    if (next === null || typeof next !== 'object' || Array.isArray(next)) return false;
    chain.push(next as Record<string, unknown>);
  }
  const last = parts.at(-1)!;
  if (!Object.hasOwn(chain.at(-1)!, last)) return false;
  delete chain.at(-1)![last];
  for (let depth = chain.length - 1; depth > 0; depth--) {
    if (Object.keys(chain[depth]!).length > 0) break;
    delete chain[depth - 1]![parts[depth - 1]!];
  }
  return true;
}

/** Fills every schema default into a copy of a value. */
export function withDefaults(node: SchemaNode, value: unknown): unknown {
  if (value === undefined && node.default !== undefined) return typeof node.default === 'object' && node.default !== null ? structuredClone(node.default) : node.default;
  if (node.type !== 'object') return value;
  // An object that requires fields (an automation's webhook trigger) is there when set, never made up.
  if (value === undefined && node.required?.length) return undefined;
  if (value !== undefined && (value === null || typeof value !== 'object' || Array.isArray(value))) return value;
  const source = (value ?? {}) as Record<string, unknown>;
  const result: Record<string, unknown> = {};
  // A map by names of the user's choosing (channels by id) holds what is configured only: its named entries
  // (channels.irc) get their defaults when they are there, and are not made up when they are not.
  const map = typeof node.additionalProperties === 'object';
  for (const [name, child] of Object.entries(node.properties ?? {})) {
    if (map && source[name] === undefined) continue;
    const filled = withDefaults(child, source[name]);
    if (filled !== undefined) result[name] = filled;
  }
  for (const [name, child] of Object.entries(source)) {
    if (name in result) continue;
    result[name] = typeof node.additionalProperties === 'object' ? withDefaults(node.additionalProperties, child) : child;
  }
  return result;
}

export const effectiveConfig = (raw: unknown): GatewayConfig => withDefaults(configSchema, raw) as GatewayConfig;

/** Whether a running daemon needs a restart before a change of this key takes effect. */
export const needsReload = (key: string): boolean => RELOAD_KEYS.some((reload) => key === reload || key.startsWith(`${reload}.`));

export const needsRestart = (key: string): boolean => !needsReload(key) &&
  !LIVE_KEYS.some((live) => key === live || key.startsWith(`${live}.`)) && !LIVE_KEY_PATTERNS.some((pattern) => pattern.test(key));

/** Every leaf key of the schema, for listings and completion. */
export function leafKeys(node: SchemaNode = configSchema, prefix = ''): string[] {
  if (node.type !== 'object' || !node.properties) return prefix ? [prefix] : [];
  return Object.entries(node.properties).flatMap(([name, child]) => leafKeys(child, prefix ? `${prefix}.${name}` : name));
}
