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
const INFRA = new Set(['kernel', 'http', 'ws', 'store', 'auth']);
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

  it('no two server folders import each other', () => {
    const pairs = new Set(server.map(({ from, to }) => `${serverFolder(from)} ${serverFolder(to)}`).filter((pair) => pair.split(' ')[0] !== pair.split(' ')[1]));
    const mutual = [...pairs].filter((pair) => pairs.has(pair.split(' ').reverse().join(' ')));
    expect(mutual).to.deep.equal([]);
  });

  it('the daemon keeps the lifecycle only: features are composed in compose.ts', () => {
    const daemon = readFileSync(join(SRC, 'server/daemon.ts'), 'utf8');
    const features = [...new Set(server.map(({ to }) => serverFolder(to)))].filter((folder) => folder !== '.' && !INFRA.has(folder));
    expect(features.filter((feature) => daemon.includes(`'./${feature}/`))).to.deep.equal([]);
    const compose = readFileSync(join(SRC, 'server/compose.ts'), 'utf8');
    for (const feature of features) expect(compose, feature).to.include(`'./${feature}/module.ts'`);
  });

  it('TLS loads when a connection needs it: nothing the daemon or the CLI loads takes node:https or node:tls at its top level', () => {
    // Loading them costs a daemon about 2.5 MB before it has made a single connection.
    const TOP_LEVEL = /^(?:import\s+(?!type\b)[^;]*?from\s+|const\s[^=]+=\s*process\.getBuiltinModule\(\s*)['"]node:(?:https|tls)['"]/m;
    const found = files(join(SRC, 'server')).concat(files(join(SRC, 'shared')), files(join(SRC, 'cli'))).filter((file) => TOP_LEVEL.test(readFileSync(file, 'utf8')));
    expect(found.map((file) => relative(SRC, file))).to.deep.equal([]);
  });
});
