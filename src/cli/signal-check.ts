/**
 * `gateway doctor`'s Signal check, for each enabled Signal account:
 * signal-cli installed, its daemon answering at the account's rpcUrl, and
 * the account's number among its accounts; each failure with the commands
 * that fix it (install, link or register, run the daemon as the gateway
 * needs it). It never calls `receive`: a message it asked for would be
 * taken from the gateway.
 */
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import type { GatewayConfig } from '../shared/config/types.ts';

/** A check as doctor.ts reports it. */
interface Check { name: string; status: 'ok' | 'warn' | 'fail'; detail: string; fix?: string }

const DEFAULT_RPC_URL = 'http://127.0.0.1:8080';
const PROBE_TIMEOUT_MS = 3000;
const RELEASES = 'https://github.com/AsamK/signal-cli/releases';

interface SignalAccount { name: string; number?: string; rpcUrl: string }

/** The enabled accounts of channels.signal: the top level when it names a number (or nothing else does), and each of its accounts. */
function accountsOf(config: GatewayConfig): SignalAccount[] {
  const top = config.channels.signal as (Record<string, unknown> & { enabled?: boolean; accounts?: Record<string, Record<string, unknown>> }) | undefined;
  if (!top?.enabled) return [];
  const rpcUrl = typeof top.rpcUrl === 'string' ? top.rpcUrl : DEFAULT_RPC_URL;
  const found: SignalAccount[] = [];
  if (typeof top.account === 'string' || Object.keys(top.accounts ?? {}).length === 0) found.push({ name: 'default', ...(typeof top.account === 'string' ? { number: top.account } : {}), rpcUrl });
  for (const [name, account] of Object.entries(top.accounts ?? {})) {
    if (account.enabled === false) continue;
    found.push({ name, ...(typeof account.account === 'string' ? { number: account.account } : {}), rpcUrl: typeof account.rpcUrl === 'string' ? account.rpcUrl : rpcUrl });
  }
  return found;
}

const installed = () => (process.env.PATH ?? '').split(':').some((folder) => {
  try {
    accessSync(join(folder || '.', 'signal-cli'), constants.X_OK);
    return true;
  } catch {
    return false;
  }
});

/** What signal-cli's daemon at an address says: its version and, started without -a, its accounts; or why it did not answer. */
async function probe(rpcUrl: string): Promise<{ version?: string; accounts?: string[]; problem?: string }> {
  const call = async (method: string) => {
    const response = await fetch(new URL('api/v1/rpc', rpcUrl.endsWith('/') ? rpcUrl : `${rpcUrl}/`), {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: {} }), signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
    });
    if (response.status !== 200) throw new Error(`it answered HTTP ${response.status}${response.status === 421 ? ' (it answers only at the address it listens on)' : ''}`);
    return await response.json() as { result?: unknown; error?: { code?: number; message?: string } };
  };
  try {
    const version = await call('version');
    const accounts = await call('listAccounts');
    const found = Array.isArray(accounts.result) ? accounts.result.map((entry: { number?: unknown }) => String(entry?.number)) : undefined;
    return { version: String((version.result as { version?: unknown } | undefined)?.version ?? '?'), ...(found ? { accounts: found } : {}) };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    return { problem: cause ?? (error as Error).message };
  }
}

/** Where signal-cli's daemon is told to listen for an rpcUrl (its --http). */
function listenOf(rpcUrl: string): string {
  const url = new URL(rpcUrl);
  return `${url.hostname.replace(/^\[|\]$/g, '')}:${url.port || (url.protocol === 'https:' ? 443 : 80)}`;
}

export async function signalCheck(config: GatewayConfig | undefined): Promise<Check[]> {
  if (!config) return [];
  const accounts = accountsOf(config);
  if (accounts.length === 0) return [];
  const probes = new Map<string, ReturnType<typeof probe>>();
  const checks: Check[] = [];
  for (const account of accounts) {
    const who = account.name === 'default' ? '' : `account ${account.name}: `;
    const number = account.number ?? '+15550100';
    if (!account.number) {
      checks.push({ name: 'signal', status: 'fail', detail: `${who}no number is set`, fix: `gateway config set channels.signal.${account.name === 'default' ? '' : `accounts.${account.name}.`}account +15550100   # the number signal-cli has` });
      continue;
    }
    if (!probes.has(account.rpcUrl)) probes.set(account.rpcUrl, probe(account.rpcUrl));
    const found = await probes.get(account.rpcUrl)!;
    const daemon = `signal-cli -a ${number} daemon --http ${listenOf(account.rpcUrl)} --receive-mode=manual   # keep it running (signal-cli's sources have a systemd unit: data/signal-cli@.service)`;
    const setUp = [
      `signal-cli link -n gateway | tee >(xargs -L 1 qrencode -t utf8)   # link to a phone: scan the QR code in Signal > Settings > Linked devices`,
      `signal-cli -a ${number} register && signal-cli -a ${number} verify <code>   # or register the number itself (by SMS; a captcha may be asked: https://signalcaptchas.org/registration/generate.html)`,
    ];
    if (found.problem) {
      if (!installed()) {
        checks.push({
          name: 'signal', status: 'fail', detail: `${who}signal-cli is not installed, and nothing answers at ${account.rpcUrl} (${found.problem})`,
          fix: [`install signal-cli: ${RELEASES} (unpack it and put its bin/ on PATH; it needs Java 21, or take its native build)`, ...setUp, daemon].join('\n'),
        });
      } else {
        checks.push({ name: 'signal', status: 'fail', detail: `${who}nothing answers at ${account.rpcUrl} (${found.problem}): signal-cli's daemon is not running there`, fix: daemon });
      }
      continue;
    }
    if (found.accounts && !found.accounts.includes(number)) {
      checks.push({ name: 'signal', status: 'fail', detail: `${who}signal-cli ${found.version} at ${account.rpcUrl} has no account ${number} (it has ${found.accounts.join(', ') || 'none'})`, fix: [...setUp, 'then start its daemon again'].join('\n') });
      continue;
    }
    const mode = found.accounts ? 'for several accounts' : 'for one account (which one shows in what it receives)';
    checks.push({ name: 'signal', status: 'ok', detail: `${who}signal-cli ${found.version} answers at ${account.rpcUrl}, ${mode}${installed() ? '' : '; its command is not on this PATH (needed only to link or register)'}` });
  }
  return checks;
}
