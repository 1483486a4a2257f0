// The reference parts of the documentation, made from what they describe: docs/cli.md's command reference from
// the commands' own definitions (oclif.manifest.json, which the build writes), docs/configuration.md's table of
// settings from the config schema. Each lives between its markers in its file; the text around it is written by
// hand. `npm run docs` rewrites them; test/unit/docs.test.ts fails when they are out of date.
import { readFileSync, writeFileSync } from 'node:fs';
import { configSchema, READ_ONLY_KEYS, type SchemaNode } from '../src/shared/config/schema.ts';
import { needsReload, needsRestart } from '../src/shared/config/keys.ts';

const root = new URL('..', import.meta.url).pathname;

interface ManifestFlag {
  name: string;
  char?: string;
  description?: string;
  type: 'boolean' | 'option';
  default?: unknown;
  multiple?: boolean;
  allowNo?: boolean;
  required?: boolean;
  options?: string[];
  aliases?: string[];
  env?: string;
  hidden?: boolean;
  helpGroup?: string;
}
interface ManifestArg { name: string; description?: string; required?: boolean; options?: string[] }
interface ManifestCommand {
  id: string;
  summary?: string;
  description?: string;
  examples?: (string | { command: string; description?: string })[];
  flags: Record<string, ManifestFlag>;
  args: Record<string, ManifestArg>;
  aliases?: string[];
  hidden?: boolean;
}
export interface Manifest { commands: Record<string, ManifestCommand> }
interface Topics { [name: string]: { description: string } }

/** The flags every command takes, described once at the head of docs/cli.md. */
export const GLOBAL_FLAGS = ['json', 'profile', 'url'];

const words = (id: string) => id.split(':').join(' ');
/** Text as Markdown shows it: a <placeholder> outside `code` is kept, not taken for an HTML tag. */
const prose = (text: string) => text.split(/(`[^`]*`)/).map((part, index) => (index % 2 ? part : part.replace(/</g, '&lt;'))).join('');
const cell = (text: string) => prose(text).replace(/\|/g, '\\|').replace(/\n+/g, ' ');

export function readManifest(): Manifest {
  return JSON.parse(readFileSync(`${root}oclif.manifest.json`, 'utf8')) as Manifest;
}

/** The commands a user can run, in the order of their names. */
export function publicCommands(manifest: Manifest): ManifestCommand[] {
  return Object.values(manifest.commands).filter((command) => !command.hidden).sort((a, b) => words(a.id).localeCompare(words(b.id)));
}

export const commandFlags = (command: ManifestCommand): ManifestFlag[] =>
  Object.values(command.flags).filter((flag) => !flag.hidden && !GLOBAL_FLAGS.includes(flag.name));

function flagName(flag: ManifestFlag): string {
  let name = flag.allowNo ? `--[no-]${flag.name}` : `--${flag.name}`;
  if (flag.char) name = `-${flag.char}, ${name}`;
  if (flag.type === 'option') name += flag.options ? ` <${flag.options.join('|')}>` : ' <value>';
  return `\`${name}\``;
}

function flagText(flag: ManifestFlag): string {
  const notes: string[] = [];
  if (flag.required) notes.push('required');
  if (flag.multiple) notes.push('may be repeated');
  if (flag.aliases?.length) notes.push(`also spelled ${flag.aliases.map((alias) => `\`--${alias}\``).join(', ')}`);
  if (flag.default !== undefined && flag.default !== false) notes.push(`default ${JSON.stringify(flag.default)}`);
  if (flag.env) notes.push(`else \`${flag.env}\``);
  return cell(`${flag.description ?? ''}${notes.length ? ` (${notes.join('; ')})` : ''}`);
}

function usage(command: ManifestCommand): string {
  const args = Object.values(command.args).map((arg) => (arg.required ? `<${arg.name}>` : `[${arg.name}]`));
  const flags = commandFlags(command).length ? ['[flags]'] : [];
  return ['gateway', words(command.id), ...args, ...flags].join(' ');
}

/** docs/cli.md's reference: every command with its arguments, flags and examples. */
export function cliReference(manifest: Manifest, topics: Topics): string {
  const out: string[] = [];
  let topic: string | undefined;
  for (const command of publicCommands(manifest)) {
    // A command of a topic (`profiles create`, and `profiles` itself) goes under the topic's heading.
    const head = command.id.split(':')[0]!;
    const group = command.id.includes(':') || topics[head] ? head : undefined;
    if (group && group !== topic) out.push(`### ${group}`, '', prose(topics[group]?.description ?? ''), '');
    topic = group;
    out.push(`${group ? '####' : '###'} \`gateway ${words(command.id)}\``, '');
    if (command.summary) out.push(prose(command.summary), '');
    if (command.description) out.push(prose(command.description), '');
    out.push('```sh', usage(command), '```', '');
    const args = Object.values(command.args);
    if (args.length) {
      out.push('| argument | |', '|---|---|');
      for (const arg of args) {
        const options = arg.options ? ` (one of ${arg.options.join(', ')})` : '';
        out.push(`| \`${arg.name}\` | ${cell(`${arg.description ?? ''}${options}${arg.required ? '' : ' (optional)'}`)} |`);
      }
      out.push('');
    }
    const flags = commandFlags(command);
    if (flags.length) {
      out.push('| flag | |', '|---|---|');
      for (const flag of flags) out.push(`| ${flagName(flag)} | ${flagText(flag)} |`);
      out.push('');
    }
    const examples = (command.examples ?? []).map((example) => (typeof example === 'string' ? example : example.command).replaceAll('<%= config.bin %>', 'gateway'));
    if (examples.length) out.push('Examples:', '', '```sh', ...examples, '```', '');
  }
  return out.join('\n').trimEnd();
}

export interface SettingRow { key: string; type: string; defaultValue: string; applies: string; description: string }

/** The name a map's entries go by in a key: channels.<id>, mcp.servers.<name>. */
function placeholder(path: string): string {
  if (path.endsWith('.accounts') || path === 'mcp.servers') return '<name>';
  if (path === 'models.aliases') return '<alias>';
  if (path.endsWith('.headers')) return '<header>';
  return '<id>';
}

function typeOf(node: SchemaNode): string {
  if (node.enum) return node.enum.map((value) => String(value)).join(' \\| ');
  if (node.anyOf && !node.type) return node.anyOf.map(typeOf).join(' or ');
  if (node.type === 'array') return `list of ${node.items ? typeOf(node.items) : 'values'}`;
  if (node.type === 'integer' && node.minimum !== undefined && node.maximum !== undefined) return `integer ${node.minimum}-${node.maximum}`;
  if (node.type === 'string' && node.format) return node.format === 'uri' ? 'URL' : node.format;
  if (node.type === 'string' && node.anyOf) return 'IP address';
  if (node.type === 'object' && !node.properties && node.additionalProperties) return 'object';
  return node.type ?? 'any JSON value';
}

function appliesOf(key: string): string {
  if (READ_ONLY_KEYS[key]) return 'read-only';
  if (needsReload(key)) return 'reload';
  // The keys of a channel under an id of the user's choosing follow channels.irc's.
  return needsRestart(key.replace(/<[a-z]+>/g, 'x').replaceAll('[]', '')) ? 'restart' : 'at once';
}

/** Every setting of config.json: the schema's leaves, a map's entries under their placeholder, a list's items' fields. */
export function settings(node: SchemaNode = configSchema, path = ''): SettingRow[] {
  const row = (key: string, of: SchemaNode, description = of.description ?? ''): SettingRow => ({
    key, type: typeOf(of), defaultValue: of.default === undefined ? '' : JSON.stringify(of.default), applies: appliesOf(key), description,
  });
  if (node.type === 'object' && node.properties && !(typeof node.additionalProperties === 'object')) {
    return Object.entries(node.properties).flatMap(([name, child]) => settings(child, path ? `${path}.${name}` : name));
  }
  if (node.type === 'object' && typeof node.additionalProperties === 'object') {
    // A map by names of the user's choosing: its named entries (channels.irc, channels.telegram) with their own keys, then any other name.
    const named = Object.entries(node.properties ?? {}).flatMap(([name, child]) => settings(child, `${path}.${name}`));
    const entry = `${path}.${placeholder(path)}`;
    const inner = node.additionalProperties;
    const rows = inner.type === 'object' && (inner.properties || typeof inner.additionalProperties === 'object')
      ? settings(inner, entry)
      : [row(entry, inner, node.description ?? '')];
    return [row(path, node), ...named, ...rows];
  }
  if (node.type === 'array' && node.items?.type === 'object' && node.items.properties) {
    return [row(path, node), ...Object.entries(node.items.properties).flatMap(([name, child]) => settings(child, `${path}[].${name}`))];
  }
  return [row(path, node)];
}

/** docs/configuration.md's table of settings. */
export function configReference(): string {
  const out = ['| key | type | default | applies | |', '|---|---|---|---|---|'];
  for (const setting of settings()) {
    out.push(`| \`${setting.key}\` | ${setting.type} | ${setting.defaultValue ? `\`${cell(setting.defaultValue)}\`` : ''} | ${setting.applies} | ${cell(setting.description)} |`);
  }
  return out.join('\n');
}

export const GENERATED = {
  'docs/cli.md': (manifest: Manifest) => cliReference(manifest, JSON.parse(readFileSync(`${root}package.json`, 'utf8')).oclif.topics as Topics),
  'docs/configuration.md': () => configReference(),
} as const;

const BEGIN = '<!-- generated by scripts/docs.ts: run `npm run docs` after changing a command or a setting -->';
const END = '<!-- end of generated reference -->';

/** The file with its generated part made afresh. */
export function regenerated(file: keyof typeof GENERATED, manifest: Manifest): string {
  const text = readFileSync(`${root}${file}`, 'utf8');
  const start = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  if (start === -1 || end < start) throw new Error(`${file} has no generated part (its markers are missing)`);
  return `${text.slice(0, start + BEGIN.length)}\n\n${GENERATED[file](manifest)}\n\n${text.slice(end)}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const manifest = readManifest();
  for (const file of Object.keys(GENERATED) as (keyof typeof GENERATED)[]) {
    const next = regenerated(file, manifest);
    if (next !== readFileSync(`${root}${file}`, 'utf8')) {
      writeFileSync(`${root}${file}`, next);
      process.stdout.write(`wrote ${file}\n`);
    }
  }
}
