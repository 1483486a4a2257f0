/** Sending a person to a URL: a browser opened only on a desktop session, and over SSH the line that forwards a port of this host. */
import { spawn } from 'node:child_process';
import { userInfo } from 'node:os';
import { isLoopbackHost } from '../shared/mcp-url.ts';

/** Whether a browser can be opened here: a desktop session, not over SSH. */
export const desktopSession = (): boolean => !process.env.SSH_CONNECTION && !process.env.SSH_TTY
  && (process.platform === 'darwin' || process.platform === 'win32' || Boolean(process.env.DISPLAY || process.env.WAYLAND_DISPLAY));

/** Opens the URL in the desktop's browser, when there is one and a person is at the terminal; says whether it tried. */
export function openBrowser(url: string): boolean {
  if (!desktopSession() || !process.stdout.isTTY) return false;
  const opener = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
  try {
    spawn(opener, [url], { stdio: 'ignore', detached: true }).on('error', () => undefined).unref();
    return true;
  } catch {
    return false;
  }
}

/** Over SSH, for a URL on this host's loopback: the `ssh -N -L` line a person runs on the computer with the browser. */
export function sshForward(url: string): string | undefined {
  const target = new URL(url);
  if (!process.env.SSH_CONNECTION || !isLoopbackHost(target.hostname)) return undefined;
  const port = target.port || (target.protocol === 'https:' ? '443' : '80');
  const host = process.env.SSH_CONNECTION.split(' ')[2] ?? '<this-host>';
  return `ssh -N -L ${port}:127.0.0.1:${port} ${loginName()}@${host}`;
}

/** The name this session logged in as: USER or LOGNAME where set (some SSH and sudo set-ups leave both unset or empty), else the account's own. */
function loginName(): string {
  const named = process.env.USER || process.env.LOGNAME;
  if (named) return named;
  try {
    return userInfo().username || '<you>';
  } catch {
    // A uid with no account entry (some containers).
    return '<you>';
  }
}
