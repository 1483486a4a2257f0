import { expect } from 'chai';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { ROOT } from '../support/cli.ts';

/**
 * The arrows the code promises, checked on every import (static, re-export,
 * dynamic and type-only): commands -> cli -> shared, server -> shared; the
 * kernel imports no feature; a feature reaches another feature only through
 * that feature's module.ts; no two server folders import each other.
 */
const SRC = join(ROOT, 'src');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return /\.(ts|js)$/.test(name) && !name.endsWith('.d.cts') ? [path] : [];
  });
}

const IMPORT = /(?:import|export)\s+(?:type\s+)?(?:[^'"`;]*?\s+from\s+)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

interface Edge { from: string; to: string }

/** The cycles of a directed graph (its strongly connected components of more than one node), each sorted. */
function cycles(pairs: readonly (readonly [string, string])[]): string[][] {
  const graph = new Map<string, string[]>();
  for (const [from, to] of pairs) graph.set(from, [...(graph.get(from) ?? []), to]);
  const nodes = new Set(pairs.flat());
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (node: string) => {
    index.set(node, next);
    low.set(node, next++);
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1) found.push(component.sort());
  };
  for (const node of nodes) if (!index.has(node)) visit(node);
  return found;
}

function edges(): Edge[] {
  const found: Edge[] = [];
  for (const file of files(SRC)) {
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(IMPORT)) {
      const spec = match[1] ?? match[2]!;
      if (!spec.startsWith('.')) continue;
      found.push({ from: relative(SRC, file), to: relative(SRC, resolve(dirname(file), spec)) });
    }
  }
  return found;
}

/** Server folders that are not features: the kernel, the transports and the infrastructure modules share. */
const INFRA = new Set(['kernel', 'http', 'ws', 'store', 'auth', 'sandbox']);
const layer = (path: string) => path.split('/')[0]!;
/** The server folder of a path, or "." for the daemon's own files at the top of src/server. */
const serverFolder = (path: string) => {
  const parts = path.split('/');
  return parts.length > 2 ? parts[1]! : '.';
};

describe('architecture: the import arrows', () => {
  const all = edges();
  const problems = (check: (edge: Edge) => string | undefined) => all.map(check).filter((problem): problem is string => problem !== undefined);

  it('finds the imports it checks', () => {
    expect(all.length).to.be.greaterThan(200);
  });

  it('commands -> cli -> shared, server -> shared, with commands/run.ts starting the daemon and store migrate copying its store the two crossings', () => {
    const allowed: Record<string, string[]> = {
      commands: ['commands', 'cli', 'shared'],
      hooks: ['cli', 'shared'],
      cli: ['cli', 'shared'],
      shared: ['shared'],
      server: ['server', 'shared'],
      ui: ['ui', 'shared'],
    };
    expect(problems(({ from, to }) => {
      if (from === 'commands/run.ts' && to === 'server/main.ts') return undefined;
      if (from === 'commands/store/migrate.ts' && to === 'server/store/copy-to-postgres.ts') return undefined;
      return allowed[layer(from)]?.includes(layer(to)) ? undefined : `${from} imports ${to}`;
    })).to.deep.equal([]);
  });

  const server = all.filter(({ from, to }) => layer(from) === 'server' && layer(to) === 'server');

  it('the kernel imports no feature, no transport and no infrastructure but the store\'s types', () => {
    expect(server.filter(({ from, to }) => serverFolder(from) === 'kernel' && !['kernel', 'store'].includes(serverFolder(to)))
      .map(({ from, to }) => `${from} imports ${to}`)).to.deep.equal([]);
  });

  it('transports and infrastructure import no feature', () => {
    expect(server.filter(({ from, to }) => INFRA.has(serverFolder(from)) && !INFRA.has(serverFolder(to)))
      .map(({ from, to }) => `${from} imports ${to}`)).to.deep.equal([]);
  });

  it('a feature imports another feature only through what its module.ts exports, and never a transport', () => {
    expect(server.filter(({ from, to }) => {
      const source = serverFolder(from);
      const target = serverFolder(to);
      if (source === '.' || INFRA.has(source) || source === target) return false;
      if (target === 'http' || target === 'ws' || target === '.') return true;
      return !INFRA.has(target) && to !== `server/${target}/module.ts`;
    }).map(({ from, to }) => `${from} imports ${to}`)).to.deep.equal([]);
  });

  it('no file imports itself through others, however long the way round', () => {
    expect(cycles(all.map(({ from, to }) => [from, to] as const))).to.deep.equal([]);
  });

  it('no server folder imports itself through others, however long the way round', () => {
    const folders = server.map(({ from, to }) => [serverFolder(from), serverFolder(to)] as const).filter(([from, to]) => from !== to && from !== '.' && to !== '.');
    expect(cycles(folders)).to.deep.equal([]);
  });

  it('the daemon keeps the lifecycle only: every feature folder is one line of compose.ts', () => {
    const daemon = readFileSync(join(SRC, 'server/daemon.ts'), 'utf8');
    const features = readdirSync(join(SRC, 'server')).filter((name) => statSync(join(SRC, 'server', name)).isDirectory() && !INFRA.has(name));
    expect(features.length).to.be.greaterThan(15);
    expect(features.filter((feature) => daemon.includes(`'./${feature}/`))).to.deep.equal([]);
    const compose = readFileSync(join(SRC, 'server/compose.ts'), 'utf8');
    expect(features.filter((feature) => !compose.includes(`'./${feature}/module.ts'`)), 'feature folders missing from compose.ts').to.deep.equal([]);
  });

  it('no file outside the store names an engine: features ask the store\'s Dialect for what they need', () => {
    // A branch on the engine's name, or a look at which engine class is under the store.
    const NAMES_ENGINE = /\bkind\s*[!=]==?\s*['"](?:sqlite|postgres)['"]|['"](?:sqlite|postgres)['"]\s*[!=]==?\s*[\w.]*kind\b|instanceof\s+(?:Sqlite|Postgres)(?:Engine|Tx)\b/;
    const found = files(join(SRC, 'server')).filter((file) => !relative(SRC, file).startsWith('server/store/'))
      .flatMap((file) => readFileSync(file, 'utf8').split('\n').map((line, index) => [relative(SRC, file), index + 1, line] as const))
      .filter(([, , line]) => NAMES_ENGINE.test(line)).map(([file, line, text]) => `${file}:${line}: ${text.trim()}`);
    expect(found).to.deep.equal([]);
  });

  it('TLS loads when a connection needs it: nothing the daemon or the CLI loads takes node:https or node:tls at its top level', () => {
    // Loading them costs a daemon about 2.5 MB before it has made a single connection.
    const TOP_LEVEL = /^(?:import\s+(?!type\b)[^;]*?from\s+|const\s[^=]+=\s*process\.getBuiltinModule\(\s*)['"]node:(?:https|tls)['"]/m;
    const found = files(join(SRC, 'server')).concat(files(join(SRC, 'shared')), files(join(SRC, 'cli'))).filter((file) => TOP_LEVEL.test(readFileSync(file, 'utf8')));
    expect(found.map((file) => relative(SRC, file))).to.deep.equal([]);
  });
});

/** The tables a piece of SQL makes (CREATE TABLE, or a table renamed to a name). */
const made = (sql: string) => [...sql.matchAll(/\b(?:CREATE TABLE(?: IF NOT EXISTS)?|RENAME TO)\s+([a-z_][a-z0-9_]*)/g)].map((match) => match[1]!);

describe('architecture: each feature owns its tables', () => {
  const serverDir = join(SRC, 'server');
  /** Table -> the server folder whose migrations make it. */
  const owners = new Map<string, string>();
  const claim = (folder: string, sql: string) => {
    for (const table of made(sql)) {
      const owner = owners.get(table);
      if (owner && owner !== folder) throw new Error(`table ${table} is made by both ${owner} and ${folder}`);
      owners.set(table, folder);
    }
  };

  before(async () => {
    const compose = readFileSync(join(serverDir, 'compose.ts'), 'utf8');
    const folders = [...compose.matchAll(/from '\.\/([a-z-]+)\/module\.ts'/g)].map((match) => match[1]!);
    for (const folder of folders) {
      const module = (await import(join(serverDir, folder, 'module.ts'))).default as { migrations?: { sql: string }[] };
      for (const migration of module.migrations ?? []) claim(folder, migration.sql);
    }
    // The store's own: its migrations' tables and the runner's records.
    for (const file of files(join(serverDir, 'store'))) claim('store', readFileSync(file, 'utf8'));
  });

  it('knows the tables of every feature', () => {
    expect(owners.get('jobs')).to.equal('jobs');
    expect(owners.get('webhook_deliveries')).to.equal('webhooks');
    expect(owners.get('sessions')).to.equal('sessions');
    expect(owners.get('audit_events')).to.equal('store');
    expect(owners.get('module_migrations')).to.equal('store');
    expect(owners.size).to.be.greaterThan(20);
  });

  it('a feature\'s SQL touches only the tables its own migrations make', () => {
    const touches = /\b(?:FROM|JOIN|INTO|UPDATE|TABLE|ON|EXISTS)\s+([a-z_][a-z0-9_]*)\b/g;
    const problems: string[] = [];
    for (const file of files(serverDir)) {
      const folder = serverFolder(relative(SRC, file));
      for (const match of readFileSync(file, 'utf8').matchAll(touches)) {
        const owner = owners.get(match[1]!);
        if (owner && owner !== folder) problems.push(`${relative(SRC, file)} touches ${match[1]} (${owner}'s)`);
      }
    }
    expect([...new Set(problems)]).to.deep.equal([]);
  });

  it('the store keeps only the engines, the migration runner and what every feature shares', () => {
    const storeTables = [...owners].filter(([, folder]) => folder === 'store').map(([table]) => table).sort();
    expect(storeTables).to.deep.equal(['audit_events', 'legacy_module_migrations', 'legacy_schema_migrations', 'module_migrations']);
  });
});

describe('architecture: channels are inbox, outbox and one folder per platform', () => {
  const channels = join(SRC, 'server/channels');
  const platforms = readdirSync(channels).filter((name) => statSync(join(channels, name)).isDirectory() && name !== 'outbox');

  it('finds the platforms', () => {
    expect(platforms).to.include.members(['telegram', 'slack', 'discord', 'irc', 'matrix', 'email', 'xmpp']);
  });

  it('no file under src/server/channels is over 400 lines', () => {
    const long = files(channels).map((file) => [relative(SRC, file), readFileSync(file, 'utf8').split('\n').length - 1] as const).filter(([, lines]) => lines > 400);
    expect(long).to.deep.equal([]);
  });

  it('every platform is on the one account base, with the one accounts parser and the one reconnect helper', () => {
    const off = platforms.filter((platform) => {
      const sources = files(join(channels, platform)).map((file) => readFileSync(file, 'utf8')).join('\n');
      // Its accounts read by accountsOf, its connections AccountConnections, their retries timed by their Reconnect.
      return !/from '\.\.\/account-channel\.ts'/.test(sources) || !/extends AccountConnection</.test(sources) || !/accountsOf</.test(sources)
        || !/this\.reconnect\.(?:next|schedule|wait)\(/.test(sources);
    });
    expect(off).to.deep.equal([]);
  });
});
