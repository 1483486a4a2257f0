/**
 * Recording stand-ins for systemctl, launchctl, loginctl and journalctl (no
 * systemd runs as PID 1 here, and launchd is macOS's). `start` and `enable --now` run the unit's ExecStart as
 * systemd would: its Environment= and EnvironmentFile= lines, INVOCATION_ID and
 * JOURNAL_STREAM set, stdout and stderr into the unit's journal; `stop` sends
 * SIGTERM and waits; launchctl bootstrap, kickstart, kill, bootout and print do
 * the same from a property list. Every call is recorded.
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, chmodSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** What both managers' fakes share: their state folder, starting a command line detached behind a waiter that records its exit, and stopping it. */
const COMMON = String.raw`
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const state = process.env.FAKE_SYSTEMD_STATE;
const args = process.argv.slice(2);
const file = (name, ext) => path.join(state, name + '.' + ext);
const alive = (pid) => { if (!(pid > 0)) return false; try { process.kill(pid, 0); return true; } catch { return false; } };
const pidOf = (name) => { try { return Number(fs.readFileSync(file(name, 'pid'), 'utf8')); } catch { return 0; } };
function launch(name, argv, env, out) {
  fs.rmSync(file(name, 'exit'), { force: true });
  const waiter = 'const { spawn } = require("node:child_process"); const fs = require("node:fs");'
    + 'const [exitFile, cmd, ...rest] = process.argv.slice(1);'
    + 'const child = spawn(cmd, rest, { stdio: ["ignore", "inherit", "inherit"] });'
    + 'process.on("SIGTERM", () => child.kill("SIGTERM"));'
    + 'child.on("exit", (code) => { fs.writeFileSync(exitFile, String(code ?? 128)); process.exit(0); });';
  const child = spawn(process.execPath, ['-e', waiter, file(name, 'exit'), ...argv], { env, detached: true, stdio: ['ignore', out, out] });
  fs.writeFileSync(file(name, 'pid'), String(child.pid));
  child.unref();
}
function stop(name) {
  const pid = pidOf(name);
  if (!alive(pid)) return;
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + 20000;
  while (alive(pid) && Date.now() < deadline) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 25);
}
`;

const SYSTEMCTL = String.raw`
fs.appendFileSync(path.join(state, 'calls'), JSON.stringify(['systemctl', ...args]) + '\n');
const user = args[0] === '--user';
// No user manager to reach, as under su or sudo -u (no login session, XDG_RUNTIME_DIR pointing nowhere).
if (user && process.env.FAKE_SYSTEMD_NO_USER_BUS) { process.stderr.write('Failed to connect to bus: No medium found\n'); process.exit(1); }
const rest = user ? args.slice(1) : args;
const [verb, ...names] = rest.filter((arg) => arg !== '--now');
const now = rest.includes('--now');
const dirs = user ? [path.join(process.env.XDG_CONFIG_HOME || path.join(process.env.HOME, '.config'), 'systemd/user')] : ['/etc/systemd/system'];
function words(line) {
  const out = []; let current = ''; let quoted = false; let any = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) { if (c === '\\') current += line[++i]; else if (c === '"') quoted = false; else current += c; }
    else if (c === '"') { quoted = true; any = true; }
    else if (/\s/.test(c)) { if (current || any) out.push(current.replace(/%%/g, '%')); current = ''; any = false; }
    else current += c;
  }
  if (current || any) out.push(current.replace(/%%/g, '%'));
  return out;
}
function start(unit) {
  if (alive(pidOf(unit))) return;
  const unitPath = dirs.map((dir) => path.join(dir, unit)).find((candidate) => fs.existsSync(candidate));
  if (!unitPath) { process.stderr.write('Unit ' + unit + ' not found.\n'); process.exit(5); }
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, LANG: 'C.UTF-8', INVOCATION_ID: 'fake' + Date.now(), JOURNAL_STREAM: '8:1' };
  let exec;
  for (const raw of fs.readFileSync(unitPath, 'utf8').split('\n')) {
    const line = raw.trim();
    const eq = line.indexOf('=');
    if (eq < 0 || line.startsWith('#')) continue;
    const key = line.slice(0, eq); const value = line.slice(eq + 1);
    if (key === 'ExecStart') exec = words(value);
    if (key === 'Environment') for (const pair of words(value)) { const at = pair.indexOf('='); env[pair.slice(0, at)] = pair.slice(at + 1); }
    if (key === 'EnvironmentFile') {
      const optional = value.startsWith('-');
      const envPath = words(optional ? value.slice(1) : value)[0];
      if (fs.existsSync(envPath)) for (const envLine of fs.readFileSync(envPath, 'utf8').split('\n')) { const at = envLine.indexOf('='); if (at > 0 && !envLine.startsWith('#')) env[envLine.slice(0, at).trim()] = envLine.slice(at + 1).trim(); }
      else if (!optional) { process.stderr.write('missing ' + envPath + '\n'); process.exit(1); }
    }
  }
  launch(unit, exec, env, fs.openSync(file(unit, 'journal'), 'a'));
}
switch (verb) {
  case 'daemon-reload': break;
  case 'show-environment': process.stdout.write('PATH=' + process.env.PATH + '\n'); break;
  case 'enable': for (const unit of names) { fs.writeFileSync(file(unit, 'enabled'), ''); if (now) start(unit); } break;
  case 'disable': for (const unit of names) { fs.rmSync(file(unit, 'enabled'), { force: true }); if (now) stop(unit); } break;
  case 'start': names.forEach(start); break;
  case 'stop': names.forEach(stop); break;
  case 'restart': names.forEach((unit) => { stop(unit); start(unit); }); break;
  case 'is-enabled': { const on = fs.existsSync(file(names[0], 'enabled')); process.stdout.write(on ? 'enabled\n' : 'disabled\n'); process.exit(on ? 0 : 1); }
  case 'is-active': {
    if (alive(pidOf(names[0]))) { process.stdout.write('active\n'); process.exit(0); }
    let code = null; try { code = Number(fs.readFileSync(file(names[0], 'exit'), 'utf8')); } catch {}
    process.stdout.write(code !== null && code !== 0 ? 'failed\n' : 'inactive\n'); process.exit(3);
  }
  default: process.stderr.write('fake systemctl: ' + verb + ' is not scripted\n'); process.exit(1);
}
`;

const LAUNCHCTL = String.raw`
fs.appendFileSync(path.join(state, 'calls'), JSON.stringify(['launchctl', ...args]) + '\n');
const labelOf = (target) => target.split('/').pop();
const unxml = (text) => text.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
function start(label) {
  if (alive(pidOf(label))) return;
  const plist = fs.readFileSync(file(label, 'plist-path'), 'utf8');
  const text = fs.readFileSync(plist, 'utf8');
  const argv = [...text.match(/<key>ProgramArguments<\/key>\s*<array>([\s\S]*?)<\/array>/)[1].matchAll(/<string>([\s\S]*?)<\/string>/g)].map((m) => unxml(m[1]));
  const env = { PATH: process.env.PATH, HOME: process.env.HOME };
  const vars = text.match(/<key>EnvironmentVariables<\/key>\s*<dict>([\s\S]*?)<\/dict>/);
  if (vars) for (const m of vars[1].matchAll(/<key>([^<]+)<\/key>\s*<string>([\s\S]*?)<\/string>/g)) env[m[1]] = unxml(m[2]);
  launch(label, argv, env, 'ignore');
}
const [verb] = args;
if (verb === 'bootstrap') {
  const plist = args[2];
  const label = unxml(fs.readFileSync(plist, 'utf8').match(/<key>Label<\/key>\s*<string>([^<]+)<\/string>/)[1]);
  fs.writeFileSync(file(label, 'plist-path'), plist);
  start(label);
} else if (verb === 'bootout') { const label = labelOf(args[1]); stop(label); fs.rmSync(file(label, 'plist-path'), { force: true }); }
else if (verb === 'kickstart') start(labelOf(args.at(-1)));
else if (verb === 'kill') stop(labelOf(args[2]));
else if (verb === 'print' && /^(system|gui\/\d+)$/.test(args[1])) process.stdout.write(args[1] + ' = {\n}\n');
else if (verb === 'print') {
  const label = labelOf(args[1]);
  if (!fs.existsSync(file(label, 'plist-path'))) { process.stderr.write('Could not find service "' + label + '"\n'); process.exit(113); }
  let code = 0; try { code = Number(fs.readFileSync(file(label, 'exit'), 'utf8')); } catch {}
  process.stdout.write(label + ' = {\n\tstate = ' + (alive(pidOf(label)) ? 'running' : 'not running') + '\n\tlast exit code = ' + code + '\n}\n');
} else { process.stderr.write('fake launchctl: ' + verb + ' is not scripted\n'); process.exit(1); }
`;

const LOGINCTL = String.raw`
const fs = require('node:fs');
fs.appendFileSync(require('node:path').join(process.env.FAKE_SYSTEMD_STATE, 'calls'), JSON.stringify(['loginctl', ...process.argv.slice(2)]) + '\n');
if (process.argv[2] === 'show-user') process.stdout.write((process.env.FAKE_LINGER || 'no') + '\n');
`;

const JOURNALCTL = String.raw`
const fs = require('node:fs');
const path = require('node:path');
const state = process.env.FAKE_SYSTEMD_STATE;
const args = process.argv.slice(2);
fs.appendFileSync(path.join(state, 'calls'), JSON.stringify(['journalctl', ...args]) + '\n');
const unit = args[args.indexOf('-u') + 1];
const count = Number(args[args.indexOf('-n') + 1] ?? 10);
let text = '';
try { text = fs.readFileSync(path.join(state, unit + '.journal'), 'utf8'); } catch {}
const lines = text.split('\n').filter(Boolean);
process.stdout.write(lines.slice(-count).join('\n') + (lines.length ? '\n' : ''));
`;

export class FakeSystemd {
  readonly dir = mkdtempSync(join(tmpdir(), 'gateway-systemd-'));
  readonly bin = join(this.dir, 'bin');
  readonly state = join(this.dir, 'state');

  constructor() {
    mkdirSync(this.bin);
    mkdirSync(this.state);
    for (const [name, body] of [['systemctl', SYSTEMCTL], ['launchctl', LAUNCHCTL], ['loginctl', LOGINCTL], ['journalctl', JOURNALCTL]] as const) {
      const path = join(this.bin, name);
      writeFileSync(path, `#!${process.execPath}\n${name === 'systemctl' || name === 'launchctl' ? COMMON : ''}${body}`);
      chmodSync(path, 0o755);
    }
  }

  /** Environment for the CLI: the fakes first on PATH. */
  env(linger: 'yes' | 'no' = 'no'): Record<string, string> {
    return { PATH: `${this.bin}:${process.env.PATH}`, FAKE_SYSTEMD_STATE: this.state, FAKE_LINGER: linger };
  }

  calls(): string[][] {
    const file = join(this.state, 'calls');
    return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((line) => JSON.parse(line)) : [];
  }

  journal(unit: string): string {
    const file = join(this.state, `${unit}.journal`);
    return existsSync(file) ? readFileSync(file, 'utf8') : '';
  }
}
