/**
 * `gateway doctor`'s Delta Chat check, for each enabled Delta Chat account:
 * the engine (deltachat-rpc-server) installed, the address set, and its
 * password in the secret store.
 */
import { enginePath } from '../shared/deltachat-engine.ts';
import type { GatewayConfig } from '../shared/config/types.ts';
import type { ProfilePaths } from '../shared/profile.ts';

/** A check as doctor.ts reports it. */
interface Check { name: string; status: 'ok' | 'warn' | 'fail'; detail: string; fix?: string }

/** The enabled accounts of channels.deltachat: the top level when it names an address (or nothing else does), and each of its accounts. */
function accountsOf(config: GatewayConfig): { name: string; address?: string }[] {
  const top = config.channels.deltachat as (Record<string, unknown> & { enabled?: boolean; accounts?: Record<string, Record<string, unknown>> }) | undefined;
  if (!top?.enabled) return [];
  const found: { name: string; address?: string }[] = [];
  if (typeof top.address === 'string' || Object.keys(top.accounts ?? {}).length === 0) found.push({ name: 'default', ...(typeof top.address === 'string' ? { address: top.address } : {}) });
  for (const [name, account] of Object.entries(top.accounts ?? {})) {
    if (account.enabled !== false) found.push({ name, ...(typeof account.address === 'string' ? { address: account.address } : {}) });
  }
  return found;
}

export async function deltachatCheck(config: GatewayConfig | undefined, paths: ProfilePaths): Promise<Check[]> {
  if (!config) return [];
  const accounts = accountsOf(config);
  if (accounts.length === 0) return [];
  let engine: string;
  try {
    engine = enginePath();
  } catch (error) {
    return [{ name: 'deltachat', status: 'fail', detail: (error as Error).message, fix: 'npm install   # in the gateway\'s folder: it installs Delta Chat\'s engine for this platform where one is published' }];
  }
  const { openSecretStore } = await import('../shared/secrets/secret-store.ts');
  const store = openSecretStore(paths, config.secrets.backend ?? 'file');
  const checks: Check[] = [];
  for (const account of accounts) {
    const where = (key: string) => (account.name === 'default' ? `channels.deltachat.${key}` : `channels.deltachat.accounts.${account.name}.${key}`);
    const who = account.name === 'default' ? '' : `account ${account.name}: `;
    if (!account.address) {
      checks.push({ name: 'deltachat', status: 'fail', detail: `${who}no address is set`, fix: `gateway config set ${where('address')} bot@example.org --profile ${paths.name}` });
      continue;
    }
    let password: string | undefined;
    try {
      password = await store.get(where('password'));
    } catch (error) {
      checks.push({ name: 'deltachat', status: 'warn', detail: `${who}the secret ${where('password')} could not be read (${(error as Error).message})` });
      continue;
    }
    checks.push(password
      ? { name: 'deltachat', status: 'ok', detail: `${who}${account.address}, its password set; Delta Chat's engine at ${engine}` }
      : { name: 'deltachat', status: 'fail', detail: `${who}${account.address} has no password: the account cannot log in`, fix: `printf %s "$PASSWORD" | gateway secrets set ${where('password')} --profile ${paths.name}` });
  }
  return checks;
}
