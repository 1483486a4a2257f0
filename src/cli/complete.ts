/**
 * Shell completion: the candidates for the word being typed, from the command
 * manifest (commands, flags, flag and argument options) and, where it is
 * cheap, from the profile on disk: profile names, channel names, pending
 * pairing codes, token and job ids, secret names, configuration keys. Reads
 * only; a file that cannot be read offers nothing. Runs without oclif (the
 * executable's fast path), since a shell calls it at every Tab.
 */
import { existsSync, readFileSync } from 'node:fs';
import { schemaAt } from '../shared/config/keys.ts';
import { configSchema } from '../shared/config/schema.ts';
import { gatewayHome, profilePaths } from '../shared/profile.ts';
import { listProfileNames, selectProfileName } from '../shared/profiles.ts';
import { SECRET_NAMES } from '../shared/secrets/names.ts';
import { stateRows } from './state-rows.ts';

interface ManifestFlag { name: string; char?: string; type: 'boolean' | 'option'; options?: string[] }
interface ManifestCommand { args?: Record<string, { name: string; options?: string[] }>; flags?: Record<string, ManifestFlag> }

const manifest = (): Record<string, ManifestCommand> => {
  try {
    return (JSON.parse(readFileSync(new URL('../../oclif.manifest.json', import.meta.url), 'utf8')) as { commands: Record<string, ManifestCommand> }).commands;
  } catch {
    return {};
  }
};

/** Every settable key of the configuration, dotted. */
function configKeys(): string[] {
  const keys: string[] = [];
  const walk = (node: { properties?: Record<string, unknown> }, prefix: string) => {
    for (const [name, child] of Object.entries(node.properties ?? {})) {
      const key = prefix ? `${prefix}.${name}` : name;
      keys.push(key);
      walk(child as { properties?: Record<string, unknown> }, key);
    }
  };
  walk(configSchema as { properties?: Record<string, unknown> }, '');
  return keys;
}

/** Values of the profile's state database; nothing when it cannot be read. */
async function rows(db: string, sql: string, ...params: (string | number)[]): Promise<string[]> {
  if (!existsSync(db)) return [];
  return stateRows<{ value: string }>(db, sql, ...params).then((found) => found.map((row) => String(row.value)), () => []);
}

/** The candidates for the last word of `words` (the words after `gateway`). */
export async function complete(words: string[], env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const commands = manifest();
  const current = words.at(-1) ?? '';
  const before = words.slice(0, -1);

  // The command: the longest run of leading words that names one.
  const positional: string[] = [];
  let id = '';
  let flagValue: ManifestFlag | undefined;
  let profileFlag: string | undefined;
  const flagsOf = (command: string) => ({ ...(commands[command]?.flags ?? {}) });
  for (let index = 0; index < before.length; index++) {
    const word = before[index]!;
    if (word.startsWith('-')) {
      const name = word.replace(/^-+/, '').split('=')[0]!;
      const flag = Object.values(flagsOf(id)).find((candidate) => candidate.name === name || candidate.char === name);
      if ((name === 'profile' || name === 'p') && !word.includes('=')) profileFlag = before[index + 1];
      if (flag?.type === 'option' && !word.includes('=')) {
        if (index === before.length - 1) flagValue = flag;
        index++;
      }
      continue;
    }
    const longer = id ? `${id}:${word}` : word;
    if (positional.length === 0 && Object.keys(commands).some((command) => command === longer || command.startsWith(`${longer}:`))) id = longer;
    else positional.push(word);
  }
  const matching = (values: Iterable<string>) => [...new Set(values)].filter((value) => value.startsWith(current)).sort();

  // A flag's value; --profile is every command's.
  const previous = before.at(-1);
  if ((previous === '--profile' || previous === '-p') && !flagValue) return matching(listProfileNames(gatewayHome(env)));
  if (flagValue) {
    if (flagValue.name === 'profile') return matching(listProfileNames(gatewayHome(env)));
    return matching(flagValue.options ?? []);
  }
  if (current.startsWith('-')) {
    return matching(Object.values(flagsOf(id)).map((flag) => `--${flag.name}`));
  }
  // The next word of a command name, where one can follow.
  const next = positional.length > 0 ? [] : Object.keys(commands)
    .filter((command) => (id ? command.startsWith(`${id}:`) : true))
    .map((command) => command.slice(id ? id.length + 1 : 0).split(':')[0]!)
    .filter(Boolean);
  return matching([...next, ...(await argumentValues(commands, id, positional, profileFlag, env))]);
}

/** Values of the command's next argument, by the command and the argument's name. */
async function argumentValues(commands: Record<string, ManifestCommand>, id: string, positional: string[], profileFlag: string | undefined, env: NodeJS.ProcessEnv): Promise<string[]> {
  const arg = Object.values(commands[id]?.args ?? {})[positional.length];
  if (!arg) return [];
  if (arg.options) return arg.options;
  let profile: string;
  try {
    profile = selectProfileName(profileFlag, env, gatewayHome(env)).name;
  } catch {
    return [];
  }
  const paths = profilePaths(profile, gatewayHome(env));
  switch (`${id} ${arg.name}`) {
    case 'profiles:use name': case 'profiles:remove name': case 'profiles:show name':
      return listProfileNames(gatewayHome(env));
    case 'pair:approve channel': case 'pair:reject channel': case 'pair:list channel': case 'pair:allowed channel': case 'pair:revoke channel': {
      try {
        return ['irc', ...Object.keys((JSON.parse(readFileSync(paths.config, 'utf8')) as { channels?: Record<string, unknown> }).channels ?? {})];
      } catch {
        return ['irc'];
      }
    }
    case 'pair:approve code': case 'pair:reject code':
      return rows(paths.db, "SELECT code AS value FROM channel_pairing_requests WHERE channel = ? AND status = 'pending' AND expires_at > ? ORDER BY created_at DESC LIMIT 50", positional[0] ?? '', Date.now());
    case 'tokens:revoke id':
      return rows(paths.db, 'SELECT id AS value FROM access_tokens WHERE revoked_at IS NULL ORDER BY created_at DESC LIMIT 100');
    case 'jobs:show id': case 'jobs:retry id':
      return rows(paths.db, `SELECT id AS value FROM jobs ${id === 'jobs:retry' ? "WHERE status = 'failed' " : ''}ORDER BY created_at DESC LIMIT 50`);
    case 'secrets:set name': case 'secrets:unset name':
      return [...SECRET_NAMES];
    case 'config:get key': case 'config:set key': case 'config:unset key':
      return configKeys();
    case 'config:set value': {
      // The choices the key's schema allows, where it names them.
      const node = schemaAt(positional[0] ?? '') as { enum?: unknown[]; type?: string } | undefined;
      if (node?.enum) return node.enum.map(String);
      return node?.type === 'boolean' ? ['true', 'false'] : [];
    }
    default:
      return [];
  }
}

/** The shell's side: asks `gateway __complete <words>` at each Tab. */
export function completionScript(shell: 'bash' | 'zsh'): string {
  if (shell === 'zsh') {
    return [
      '#compdef gateway',
      '# gateway completion for zsh: eval "$(gateway autocomplete zsh)" in ~/.zshrc',
      '_gateway() {',
      '  local -a candidates',
      '  candidates=("${(@f)$(gateway __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")',
      '  compadd -- ${candidates:#}',
      '}',
      'compdef _gateway gateway',
      '',
    ].join('\n');
  }
  return [
    '# gateway completion for bash: eval "$(gateway autocomplete bash)" in ~/.bashrc',
    '_gateway() {',
    '  local IFS=$\'\\n\'',
    '  COMPREPLY=($(gateway __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))',
    '}',
    'complete -o default -F _gateway gateway',
    '',
  ].join('\n');
}
