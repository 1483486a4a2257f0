// Before `npm test`: the test model server's own package (node-llama-cpp with its
// prebuilt linux-x64 binary, kept apart so the other platforms' binaries are never
// fetched; npm ci would insist on every platform's entry in the lock file, and
// the registry does not carry them all), and the programs the tests start for real. What is missing is named,
// with the command that installs it; nothing is skipped.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const root = new URL('..', import.meta.url).pathname;
const server = `${root}test/model-server`;
if (!existsSync(`${server}/node_modules/node-llama-cpp`)) {
  process.stderr.write('test: installing the test model server (test/model-server, npm install --omit=optional --no-save)\n');
  const installed = spawnSync('npm', ['install', '--omit=optional', '--no-save', '--no-audit', '--no-fund'], { cwd: server, stdio: 'inherit' });
  if (installed.status !== 0) process.exit(installed.status ?? 1);
}

const programs: [string, string][] = [
  ['ngircd', 'ngircd'], ['gnome-keyring-daemon', 'gnome-keyring'], ['dbus-run-session', 'dbus'], ['secret-tool', 'libsecret-tools'], ['ip', 'iproute2'],
  ['systemd-analyze', 'systemd'], ['script', 'bsdutils'], ['python3', 'python3'], ['zsh', 'zsh'], ['chromium', 'chromium'], ['curl', 'curl'],
  ['bwrap', 'bubblewrap'], ['prlimit', 'util-linux'], ['setpriv', 'util-linux'], ['bash', 'bash'], ['prosody', 'prosody'], ['openssl', 'openssl'],
];
// PostgreSQL's server programs live outside PATH on Debian (/usr/lib/postgresql/<version>/bin).
if (spawnSync('sh', ['-c', 'ls /usr/lib/postgresql/*/bin/postgres'], { stdio: 'ignore' }).status !== 0) programs.push(['postgres', 'postgresql']);
const missing = programs.filter(([program]) => spawnSync('sh', ['-c', `command -v ${program} || test -x /usr/sbin/${program} || ls /usr/lib/postgresql/*/bin/${program}`], { stdio: 'ignore' }).status !== 0);
if (missing.length > 0) {
  const packages = [...new Set(missing.map(([, pkg]) => pkg))].join(' ');
  process.stderr.write(`test: the tests start these programs for real and they are missing: ${missing.map(([program]) => program).join(', ')}\n`
    + `  install them: sudo apt-get install -y ${packages}   (or run bash .ci/run, which installs everything)\n`);
  process.exit(1);
}
if (!existsSync(`${root}../shared/models/stories260K.gguf`)) {
  process.stderr.write(`test: the test model ${root}../shared/models/stories260K.gguf is missing: the project's shared folder must sit beside the checkout\n`);
  process.exit(1);
}
