/**
 * `gateway doctor`: every check says ok, warn or fail, why, and the exact
 * command that fixes it. Checks read; only `--fix` changes anything, and only
 * what is safe (file modes, a stale lock), saying what it changed.
 */
import { chmodSync, existsSync, readdirSync, statfsSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { GatewayConfig } from '../shared/config/types.ts';
import { inspectDaemon, removeStaleLock } from '../shared/daemon-lock.ts';
import { GatewayError } from '../shared/errors.ts';
import { NO_WEBHOOK_SECRET_LOG } from '../shared/log-line.ts';
import { matchesPattern } from '../shared/patterns.ts';
import type { ProfilePaths } from '../shared/profile.ts';
import { redactedUrl } from '../shared/store-url.ts';

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface Check {
  name: string;
  status: CheckStatus;
  /** What was found, and why it matters. */
  detail: string;
  /** The exact command that fixes it. */
  fix?: string;
  /** What --fix changed. */
  fixed?: string;
}

const MIN_NODE: [number, number] = [22, 22];
const MB = 1024 * 1024;

interface Context {
  paths: ProfilePaths;
  fix: boolean;
  config?: GatewayConfig;
  running: boolean;
}

function nodeCheck(): Check {
  const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
  const ok = major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1]);
  return ok
    ? { name: 'node', status: 'ok', detail: `Node.js ${process.versions.node}` }
    : { name: 'node', status: 'fail', detail: `Node.js ${process.versions.node} is older than ${MIN_NODE.join('.')}`, fix: 'scripts/install.sh   # a private Node 24; or: nvm install 24' };
}

/** Folders 0700 and files 0600, owned by this user: secrets, state and logs are the owner's alone. */
function modesCheck(context: Context): Check[] {
  const { paths, fix } = context;
  const checks: Check[] = [];
  const uid = process.getuid?.();
  const entries: [string, number][] = [[paths.home, 0o700], [paths.dir, 0o700]];
  for (const name of existsSync(paths.dir) ? readdirSync(paths.dir) : []) {
    const file = join(paths.dir, name);
    if (statSync(file).isFile()) entries.push([file, 0o600]);
  }
  const loose: string[] = [];
  const fixed: string[] = [];
  for (const [path, wanted] of entries) {
    if (!existsSync(path)) continue;
    const stat = statSync(path);
    if (uid !== undefined && stat.uid !== uid) {
      checks.push({ name: 'ownership', status: 'fail', detail: `${path} belongs to uid ${stat.uid}, not to you (uid ${uid}): the daemon would fail to read or write it`, fix: `sudo chown -R $(id -un) ${paths.dir}` });
      continue;
    }
    if ((stat.mode & 0o077) === 0) continue;
    if (fix) {
      chmodSync(path, wanted);
      fixed.push(`${path} ${(stat.mode & 0o777).toString(8)} -> ${wanted.toString(8)}`);
    } else {
      loose.push(`${path} (${(stat.mode & 0o777).toString(8)})`);
    }
  }
  if (loose.length > 0) {
    checks.push({ name: 'modes', status: 'warn', detail: `readable by others: ${loose.join(', ')}`, fix: `chmod -R go-rwx ${paths.home}   # or: gateway doctor --fix` });
  } else {
    checks.push({ name: 'modes', status: 'ok', detail: 'folders 0700, files 0600', ...(fixed.length ? { fixed: fixed.join('; ') } : {}) });
  }
  return checks;
}

async function configCheck(context: Context): Promise<Check[]> {
  const { paths } = context;
  const [{ loadConfig }, { resolveListen }, { exposureProblems }] = await Promise.all([
    import('../shared/config/profile-config.ts'), import('../shared/listen.ts'), import('../shared/config/exposure.ts'),
  ]);
  try {
    context.config = loadConfig(paths).effective;
  } catch (error) {
    const failure = error as GatewayError;
    return [{ name: 'config', status: 'fail', detail: failure.message, fix: failure.hints?.join('\n') || `edit ${paths.config}` }];
  }
  const checks: Check[] = [{ name: 'config', status: 'ok', detail: existsSync(paths.config) ? `${paths.config} is valid` : 'no config.json: the defaults' }];
  let bind;
  try {
    ({ bind } = resolveListen(paths.name, context.config, {}));
  } catch (error) {
    return [...checks, { name: 'exposure', status: 'fail', detail: (error as Error).message, fix: 'gateway config set gateway.bind loopback' }];
  }
  const problems = exposureProblems(context.config, bind);
  checks.push(problems.length === 0
    ? { name: 'exposure', status: 'ok', detail: `bind ${bind.mode} (${bind.host}), auth ${context.config.gateway.auth.mode}` }
    : { name: 'exposure', status: 'fail', detail: problems.join('; '), fix: problems.some((p) => p.includes('auth.mode cannot be none')) ? 'gateway config set gateway.auth.mode token' : 'gateway config set gateway.bind loopback' });
  return checks;
}

function portFree(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}

async function daemonCheck(context: Context): Promise<Check[]> {
  const { paths, fix } = context;
  const found = inspectDaemon(paths);
  const checks: Check[] = [];
  if (found.state === 'stale') {
    if (fix) {
      removeStaleLock(paths);
      checks.push({ name: 'lock', status: 'ok', detail: `the lock of a daemon that died (pid ${found.record?.pid ?? '?'})`, fixed: `removed ${paths.lock}` });
    } else {
      checks.push({ name: 'lock', status: 'warn', detail: `a stale lock: the daemon (pid ${found.record?.pid ?? '?'}) died without cleaning up (${found.reason})`, fix: `gateway stop --profile ${paths.name}   # or: gateway doctor --fix` });
    }
  } else {
    checks.push({ name: 'lock', status: 'ok', detail: found.state === 'stopped' ? 'the daemon is stopped' : `the daemon runs (pid ${found.record.pid})` });
  }
  context.running = found.state === 'running';
  if (!context.running && context.config) {
    const { resolveListen } = await import('../shared/listen.ts');
    const { port, bind } = resolveListen(paths.name, context.config, {});
    const busy = await portFree(bind.host, port);
    checks.push(busy === undefined
      ? { name: 'port', status: 'ok', detail: `${bind.host}:${port} is free` }
      : { name: 'port', status: 'fail', detail: `${bind.host}:${port} cannot be listened on (${busy}): another process holds it`, fix: `ss -ltnp 'sport = :${port}'   # who holds it; or: gateway config set gateway.port <port> --profile ${paths.name}` });
  }
  return checks;
}

async function secretsCheck(context: Context): Promise<Check[]> {
  const { paths, config } = context;
  if (!config) return [];
  const checks: Check[] = [];
  const { openSecretStore, secretFromEnv } = await import('../shared/secrets/secret-store.ts');
  const backend = config.secrets.backend ?? 'file';
  const store = openSecretStore(paths, backend);
  if (backend === 'keychain') {
    const probe = await (store as unknown as { probe(): Promise<{ state: string; reason?: string }> }).probe();
    if (probe.state !== 'available') {
      checks.push({
        name: 'keychain', status: 'fail', detail: `the OS keychain cannot be reached (${probe.reason}): the daemon cannot read its secrets${process.env.SSH_CONNECTION ? '; over SSH there is no desktop session to unlock it' : ''}`,
        fix: [
          `dbus-run-session -- sh -c 'printf %s "$KEYRING_PASSWORD" | gnome-keyring-daemon --unlock --replace >/dev/null; gateway start --profile ${paths.name}'   # a keyring in this session`,
          `gateway secrets move file --profile ${paths.name}   # or keep this profile's secrets in its 0600 file (add --abandon if the keychain is gone for good)`,
        ].join('\n'),
      });
      return checks;
    }
    checks.push({ name: 'keychain', status: 'ok', detail: 'the OS keychain answers' });
  } else {
    checks.push({ name: 'secrets', status: 'ok', detail: `the file store ${paths.secrets}` });
  }
  // A webhook secret, or deliveries arrive only to be refused.
  let webhookSecret: string | undefined;
  try {
    webhookSecret = secretFromEnv('webhooks.github.secret') ?? (await store.get('webhooks.github.secret'));
  } catch {
    webhookSecret = undefined;
  }
  if (!webhookSecret) {
    const { lastLines } = await import('./log-tail.ts');
    const since = Date.now() - 24 * 3600_000;
    const refused = lastLines(paths.log, 5000).some((line) => line.includes(NO_WEBHOOK_SECRET_LOG) && Date.parse(/"time":"([^"]+)"/.exec(line)?.[1] ?? '') >= since);
    checks.push(refused
      ? { name: 'webhooks', status: 'fail', detail: 'deliveries arrived in the last 24 h and each was refused with 503: no webhook secret is set', fix: `gateway secrets set webhooks.github.secret --profile ${paths.name}   # the secret of the GitHub webhook, on stdin` }
      : { name: 'webhooks', status: 'ok', detail: 'no webhook secret set (POST /webhooks answers 503 until one is)' });
  } else {
    checks.push({ name: 'webhooks', status: 'ok', detail: 'a webhook secret is set' });
  }
  return checks;
}

async function serviceCheck(context: Context): Promise<Check[]> {
  const { serviceOf, unitState } = await import('./service.ts');
  const record = serviceOf(context.paths);
  if (!record) return [{ name: 'service', status: 'ok', detail: `not a service (gateway service install --profile ${context.paths.name} keeps it running across reboots)` }];
  let active: string;
  try {
    ({ active } = unitState(record));
  } catch (error) {
    return [{ name: 'service', status: 'fail', detail: (error as Error).message }];
  }
  const journal = `gateway service logs --profile ${context.paths.name}`;
  if (active === 'active') return [{ name: 'service', status: 'ok', detail: `${record.unit} is active` }];
  return [{ name: 'service', status: active === 'failed' ? 'fail' : 'warn', detail: `${record.unit} is ${active}`, fix: active === 'failed' ? `${journal}   # why it failed; then: gateway start --profile ${context.paths.name}` : `gateway start --profile ${context.paths.name}` }];
}

function storageCheck(context: Context): Check[] {
  const { paths, config } = context;
  const checks: Check[] = [];
  if (!existsSync(paths.dir)) return checks;
  const fs = statfsSync(paths.dir);
  const free = fs.bavail * fs.bsize;
  checks.push(free < 100 * MB
    ? { name: 'disk', status: 'fail', detail: `${(free / MB).toFixed(0)} MB free where the profile lives: writes fail (answers 503) below a few MB`, fix: `df -h ${paths.dir}; du -sh ${paths.dir}/*   # free space, or move GATEWAY_HOME` }
    : free < 1024 * MB
      ? { name: 'disk', status: 'warn', detail: `${(free / MB).toFixed(0)} MB free where the profile lives`, fix: `df -h ${paths.dir}` }
      : { name: 'disk', status: 'ok', detail: `${(free / 1024 / MB).toFixed(1)} GB free` });
  const size = (path: string) => (existsSync(path) ? statSync(path).size : 0);
  const wal = size(`${paths.db}-wal`);
  const url = process.env.GATEWAY_STORE_URL || config?.store.url;
  if (url) checks.push({ name: 'state', status: 'ok', detail: `kept in PostgreSQL at ${redactedUrl(url)} (gateway store status shows its schema and the daemons attached)` });
  else checks.push(wal > 256 * MB
    ? { name: 'state', status: 'warn', detail: `state.db ${(size(paths.db) / MB).toFixed(0)} MB with a ${(wal / MB).toFixed(0)} MB write-ahead log: checkpoints are falling behind`, fix: `gateway restart --profile ${paths.name}   # checkpoints it at stop` }
    : { name: 'state', status: 'ok', detail: `state.db ${(size(paths.db) / MB).toFixed(1)} MB, write-ahead log ${(wal / MB).toFixed(1)} MB` });
  const logs = readdirSync(paths.dir).filter((name) => name.startsWith('gateway.log')).reduce((sum, name) => sum + size(join(paths.dir, name)), 0);
  const bound = config ? config.log.maxBytes * (config.log.maxFiles + 1) : Number.POSITIVE_INFINITY;
  checks.push(logs > bound * 1.1
    ? { name: 'log', status: 'warn', detail: `the logs take ${(logs / MB).toFixed(0)} MB, past log.maxBytes x (log.maxFiles + 1)`, fix: `rm ${paths.log}.*   # rotated files the daemon no longer needs` }
    : { name: 'log', status: 'ok', detail: `the logs take ${(logs / MB).toFixed(1)} MB` });
  return checks;
}

async function tokensCheck(context: Context): Promise<Check[]> {
  const { paths } = context;
  if (!existsSync(paths.db)) return [];
  const { stateRows } = await import('./state-rows.ts');
  let rows: { id: string; name: string; expires_at: number }[];
  try {
    rows = await stateRows(paths.db, 'SELECT id, name, expires_at FROM access_tokens WHERE revoked_at IS NULL AND expires_at > ? AND expires_at < ? ORDER BY expires_at',
      Date.now(), Date.now() + 7 * 24 * 3600_000);
  } catch (error) {
    return [{ name: 'tokens', status: 'warn', detail: `state.db could not be read (${(error as Error).message})`, fix: `gateway start --profile ${paths.name}   # says what is wrong with it` }];
  }
  if (rows.length === 0) return [{ name: 'tokens', status: 'ok', detail: 'no token expires within 7 days' }];
  const list = rows.map((row) => `${row.id} (${row.name}, ${new Date(Number(row.expires_at)).toISOString().slice(0, 10)})`).join(', ');
  return [{ name: 'tokens', status: 'warn', detail: `expiring within 7 days: ${list}`, fix: `gateway tokens create --name <name> --scope <scope> --expires-in 90d   # hand the new one out, then: gateway tokens revoke ${rows[0]!.id}` }];
}

async function channelsCheck(context: Context): Promise<Check[]> {
  if (!context.running) return [];
  const { connectToDaemon } = await import('./rpc-client.ts');
  let channels: { channel: string; account: string; state: string; detail?: string }[];
  try {
    const client = await connectToDaemon(context.paths, { timeoutMs: 5000 });
    try {
      ({ channels } = await client.call('channels.status', undefined, 5000));
    } finally {
      client.close();
    }
  } catch (error) {
    return [{ name: 'channels', status: 'warn', detail: `the daemon did not answer (${(error as Error).message})`, fix: `gateway status --profile ${context.paths.name}` }];
  }
  // A channel that is not enabled is meant to be down.
  const settings = (context.config?.channels ?? {}) as Record<string, { enabled?: boolean }>;
  channels = channels.filter((channel) => settings[channel.channel]?.enabled);
  if (channels.length === 0) return [{ name: 'channels', status: 'ok', detail: 'no channel enabled' }];
  const down = channels.filter((channel) => channel.state !== 'connected');
  const named = (list: typeof channels) => list.map((channel) => `${channel.channel}/${channel.account} ${channel.state}${channel.detail ? ` (${channel.detail})` : ''}`).join(', ');
  return [down.length === 0
    ? { name: 'channels', status: 'ok', detail: named(channels) }
    : { name: 'channels', status: 'warn', detail: named(down), fix: `gateway channels status --profile ${context.paths.name}; gateway logs --profile ${context.paths.name}` }];
}

/** exec's sandbox, when some agent may run commands: bubblewrap there, and whether limits hold per sandbox (a control group) or per process. */
async function sandboxCheck(context: Context): Promise<Check[]> {
  const config = context.config;
  const approvals = [config?.tools.exec.approval ?? 'off', ...Object.values(config?.agents ?? {}).map((agent) => agent.exec?.approval)];
  if (!approvals.some((approval) => approval && approval !== 'off')) return [];
  const { accessSync, constants } = await import('node:fs');
  const onPath = (program: string) => (process.env.PATH ?? '').split(':').some((folder) => {
    try {
      accessSync(join(folder, program), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
  if (!onPath('bwrap')) return [{ name: 'sandbox', status: 'fail', detail: 'exec is on but bubblewrap is not installed: commands are refused', fix: 'sudo apt-get install bubblewrap' }];
  const { cgroupSupport } = await import('../shared/cgroup.ts');
  const support = await cgroupSupport();
  return [...(await workspaceCheck(context, await import('../shared/workspace-image.ts'))), support.available
    ? { name: 'sandbox', status: 'ok', detail: `bubblewrap; each command's memory and processes bounded together (cgroup v${support.version} under ${support.where})` }
    : {
      name: 'sandbox', status: 'warn',
      detail: `bubblewrap, but memory and process limits hold per process only: ${support.reason} (a command may start several processes each up to tools.exec.memoryMB)`,
      fix: 'run the daemon as root, or as a systemd service with Delegate=yes (gateway service install), so it can make a control group per command',
    }];
}

/**
 * Whether tools.exec.workspaceMB holds by construction (each workspace a file
 * system of its own) or is watched, and why; an agent's own workspace folder
 * (agents.<id>.workspace) is always watched only, and said so with the way to
 * have the bound enforced.
 */
async function workspaceCheck(context: Context, images: typeof import('../shared/workspace-image.ts')): Promise<Check[]> {
  const exec = context.config?.tools.exec;
  if (!exec) return [];
  const support = images.imageSupport();
  const mounted = await images.mountedImages(context.paths.dir);
  const bound = `tools.exec.workspaceMB (${exec.workspaceMB} MB)`;
  const passing = 'a command may write past it before it is stopped, and files.write is not bounded by it';
  const watched = (why: string, fix: string): Check => ({
    name: 'workspace', status: 'warn', detail: `${bound} is watched, not enforced: ${why}; ${passing}`, fix,
  });
  if (!support.available && mounted.length === 0) return [watched(support.reason, 'run the daemon as root on a host with loop devices and e2fsprogs, so each workspace gets a file system of its own')];
  if (exec.workspaceImage === 'off' && mounted.length === 0) return [watched('tools.exec.workspaceImage is off', `gateway config set tools.exec.workspaceImage auto --profile ${context.paths.name}`)];
  // Where the profile's workspaces are file systems of their own, an agent's own folder still is not: an image mounted over it would hide the
  // operator's files, and one folder of a shared file system has no size of its own (a project quota needs the file system made and mounted for it).
  const own = Object.entries(context.config?.agents ?? {}).filter(([, agent]) => agent.workspace).map(([id]) => id);
  const ownDetail = own.length === 0 ? '' : `; for ${own.map((id) => `agent ${id}`).join(', ')}, whose workspace is a folder of the operator's own (agents.<id>.workspace), it is watched, not enforced: `
    + `the gateway never mounts a file system over a folder of the operator's (it would hide the files in it), and a folder on a shared file system has no bound of its own to set; ${passing}`;
  const ownFix = own.map((id) => `gateway config unset agents.${id}.workspace --profile ${context.paths.name}   # ${id} then works in workspaces/${id}, a file system of its own; move the files it needs there first`);
  const larger = mounted.filter((image) => image.bytes > exec.workspaceMB * 1024 * 1024);
  if (larger.length > 0) {
    return [{
      name: 'workspace', status: 'warn',
      detail: `${larger.map((image) => `${image.folder} is a file system of ${Math.round(image.bytes / 1024 / 1024)} MB`).join(', ')}, more than ${bound}: a file system is not shrunk while mounted, so there the size is watched${ownDetail}`,
      fix: [`raise tools.exec.workspaceMB back, or move the workspace's files out, remove the profile's workspaces/.<agent>.img after unmounting it (umount <folder>, twice: the image, then the read-only guard beneath it), and let the next call make one of the new size`, ...ownFix].join('\n'),
    }];
  }
  // Mounted by an earlier version, with no guard beneath: never unmounted to be grown (its folder would be bare meanwhile).
  const unguarded = mounted.filter((image) => !image.guarded && image.bytes < exec.workspaceMB * 1024 * 1024);
  if (unguarded.length > 0) {
    return [{
      name: 'workspace', status: 'warn',
      detail: `${unguarded.map((image) => `${image.folder} is a file system of ${Math.round(image.bytes / 1024 / 1024)} MB`).join(', ')}, less than ${bound}, mounted with no read-only guard beneath it: `
        + `where the daemon may not grow a mounted file system (no CAP_SYS_RESOURCE) it keeps that size, which holds the smaller bound, until it is mounted again${ownDetail}`,
      fix: ['umount <folder> while no call acts in it; the next call mounts it again over its guard and grows it', ...ownFix].join('\n'),
    }];
  }
  return [{
    name: 'workspace', status: own.length ? 'warn' : 'ok',
    detail: `${bound} holds by construction for each workspace under the profile: a file system of its own${mounted.length ? ` (${mounted.length} mounted)` : ' (made at its first use)'}, so writes past it fail with "no space left"${ownDetail}`,
    ...(own.length ? { fix: ownFix.join('\n') } : {}),
  }];
}

/**
 * Voice, where something uses it (the audio endpoints, or an engine set by
 * hand): ffmpeg and the sandbox it runs in, and each direction's engine.
 */
async function voiceCheck(context: Context): Promise<Check[]> {
  const config = context.config;
  if (!config) return [];
  const voice = config.voice;
  const endpoint = config.gateway.http.endpoints.audio?.enabled === true;
  const chosen = voice.transcribe.kind !== 'auto' || voice.speak.kind !== 'auto';
  if (!endpoint && !chosen) return [];
  const { onPath, speaker, transcriber } = await import('../shared/voice-engines.ts');
  if (!onPath('ffmpeg')) return [{ name: 'voice', status: 'fail', detail: 'voice is used but ffmpeg is not installed: audio cannot be decoded or encoded', fix: 'sudo apt-get install ffmpeg' }];
  if (!onPath('bwrap')) return [{ name: 'voice', status: 'fail', detail: 'voice is used but bubblewrap is not installed: audio is only ever decoded in the sandbox', fix: 'sudo apt-get install bubblewrap' }];
  const engines = [['transcription', transcriber(voice)], ['speech', speaker(voice)]] as const;
  const off = engines.filter(([, engine]) => engine.kind === 'off');
  const named = engines.map(([what, engine]) => `${what}: ${engine.kind === 'off' ? `off (${engine.why})` : engine.name}`).join('; ');
  return [off.length === 0
    ? { name: 'voice', status: 'ok', detail: `ffmpeg; ${named}` }
    : { name: 'voice', status: 'warn', detail: named, fix: 'install a local engine (sudo apt-get install pocketsphinx pocketsphinx-en-us espeak-ng), or set voice.transcribe / voice.speak: docs/configuration.md' }];
}

/** Whether some agent is given the browser.* tools (its tools or its profile) and the policy does not deny them. */
function agentsBrowse(config: GatewayConfig | undefined): boolean {
  if (!config || config.gateway.tools.deny.some((pattern) => matchesPattern(pattern, 'browser.open'))) return false;
  return Object.values(config.agents).some((agent) => agent.toolProfile === 'coding' || agent.toolProfile === 'full' || agent.tools.some((pattern) => matchesPattern(pattern, 'browser.open')));
}

/**
 * The browser.* tools: Chromium and bubblewrap there, and whether a
 * browser's memory is bounded; a warning when an agent is given the tools.
 */
async function browserCheck(context: Context): Promise<Check[]> {
  const { findChromium } = await import('../shared/chromium.ts');
  const used = agentsBrowse(context.config);
  const status = used ? 'warn' : 'ok';
  const found = findChromium(context.config?.tools.browser.executablePath);
  if ('missing' in found) {
    return [{ name: 'browser', status, detail: `the browser.* tools answer 503: ${found.missing}`, fix: context.config?.tools.browser.executablePath ? 'gateway config unset tools.browser.executablePath' : 'sudo apt-get install chromium' }];
  }
  const { accessSync, constants } = await import('node:fs');
  const bwrap = (process.env.PATH ?? '').split(':').some((folder) => {
    try {
      accessSync(join(folder, 'bwrap'), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
  if (!bwrap) return [{ name: 'browser', status, detail: `Chromium is at ${found.path}, but bubblewrap is not installed: the browser.* tools answer 503 (Chromium never runs outside its sandbox)`, fix: 'sudo apt-get install bubblewrap' }];
  const { cgroupSupport } = await import('../shared/cgroup.ts');
  const support = await cgroupSupport();
  return [...(await workspaceCheck(context, await import('../shared/workspace-image.ts'))), support.available
    ? { name: 'browser', status: 'ok', detail: `Chromium at ${found.path}, in bubblewrap; each browser's memory bounded by tools.browser.memoryMB (cgroup v${support.version})` }
    : {
      name: 'browser', status, detail: `Chromium at ${found.path}, in bubblewrap, but tools.browser.memoryMB does not hold: ${support.reason}`,
      fix: 'run the daemon as root, or as a systemd service with Delegate=yes (gateway service install), so it can make a control group per browser',
    }];
}

/** web.search: the provider set up whole (an instance for SearXNG, a key for Brave and Tavily). */
async function searchCheck(context: Context): Promise<Check[]> {
  const search = context.config?.tools.web.search;
  if (!search?.provider) return [{ name: 'search', status: 'ok', detail: 'web.search has no provider (it answers 503 until tools.web.search.provider is set)' }];
  if (search.provider === 'searxng') {
    return [search.baseUrl
      ? { name: 'search', status: 'ok', detail: `web.search asks SearXNG at ${search.baseUrl}` }
      : { name: 'search', status: 'warn', detail: 'web.search uses SearXNG but no instance is set: it answers 503', fix: `gateway config set tools.web.search.baseUrl https://searx.example.org --profile ${context.paths.name}` }];
  }
  const name = `tools.web.search.${search.provider}.apiKey`;
  const { openSecretStore } = await import('../shared/secrets/secret-store.ts');
  let key: string | undefined;
  try {
    key = await openSecretStore(context.paths, context.config?.secrets.backend ?? 'file').get(name);
  } catch (error) {
    return [{ name: 'search', status: 'warn', detail: `the secret ${name} could not be read (${(error as Error).message})` }];
  }
  return [key
    ? { name: 'search', status: 'ok', detail: `web.search asks ${search.provider === 'brave' ? 'Brave Search' : 'Tavily'}, its key set` }
    : { name: 'search', status: 'warn', detail: `web.search uses ${search.provider} but its key is not set: it answers 503`, fix: `gateway secrets set ${name} --profile ${context.paths.name}   # the key, on stdin` }];
}

/** Every check, in the order a person would look. A check that throws is a failure naming what it could not do. */
export async function runDoctor(paths: ProfilePaths, options: { fix: boolean }): Promise<Check[]> {
  const context: Context = { paths, fix: options.fix, running: false };
  const steps: [string, () => Check | Check[] | Promise<Check[]>][] = [
    ['node', nodeCheck], ['modes', () => modesCheck(context)], ['config', () => configCheck(context)], ['daemon', () => daemonCheck(context)],
    ['secrets', () => secretsCheck(context)], ['service', () => serviceCheck(context)], ['storage', () => storageCheck(context)],
    ['tokens', () => tokensCheck(context)], ['channels', () => channelsCheck(context)], ['sandbox', () => sandboxCheck(context)],
    ['voice', () => voiceCheck(context)], ['signal', async () => (await import('./signal-check.ts')).signalCheck(context.config)],
    ['deltachat', async () => (await import('./deltachat-check.ts')).deltachatCheck(context.config, context.paths)],
    ['browser', () => browserCheck(context)], ['search', () => searchCheck(context)],
    ['delegation', async () => (await import('./delegation-check.ts')).delegationCheck(context.config, context.paths.name)],
  ];
  const checks: Check[] = [];
  for (const [name, step] of steps) {
    try {
      const result = await step();
      checks.push(...(Array.isArray(result) ? result : [result]));
    } catch (error) {
      checks.push({ name, status: 'fail', detail: `the check itself failed: ${(error as Error).message}` });
    }
  }
  return checks;
}
