import { createHash } from 'node:crypto';
import { usageError } from '../shared/errors.ts';
import type { ConnectAuth } from '../shared/protocol/frames.ts';
import { secretFromEnv, type SecretStore } from '../shared/secrets/secret-store.ts';
import { deviceKey } from './device-identity.ts';
import { RpcClient, type ConnectOptions } from './rpc-client.ts';

/** A gateway address as ws:// or wss:// with a path of "/"; http(s) is accepted and converted. */
export function normalizeUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text.includes('://') ? text : `ws://${text}`);
  } catch {
    throw usageError(`--url must be a gateway address such as ws://host:18789 (got ${JSON.stringify(text)}).`);
  }
  if (url.protocol === 'http:') url.protocol = 'ws:';
  if (url.protocol === 'https:') url.protocol = 'wss:';
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:') throw usageError(`--url must use ws:// or wss:// (got ${url.protocol}).`);
  if (url.username || url.password || url.search) throw usageError('--url must not carry credentials or a query string; use GATEWAY_TOKEN or a device token.');
  url.pathname = '/';
  url.hash = '';
  return url.toString();
}

/** Where this installation keeps the device token a given remote gateway issued. */
export const remoteTokenSecret = (url: string): string =>
  `device.token.${createHash('sha256').update(url).digest('hex').slice(0, 24)}`;

/**
 * Credentials for a remote gateway: GATEWAY_TOKEN / GATEWAY_PASSWORD, else the
 * device token that gateway issued. Never a credential stored for another gateway.
 */
export async function remoteCredential(url: string, store: SecretStore): Promise<ConnectAuth> {
  const token = secretFromEnv('gateway.token');
  if (token) return { token };
  const password = secretFromEnv('gateway.password');
  if (password) return { password };
  const deviceToken = await store.get(remoteTokenSecret(url));
  return deviceToken ? { deviceToken } : {};
}

/** Connects to a gateway on another host (or through an SSH tunnel) with this installation's device key. */
export async function connectRemote(url: string, store: SecretStore, options: Partial<ConnectOptions> = {}): Promise<RpcClient> {
  const [auth, device] = await Promise.all([options.auth ?? remoteCredential(url, store), deviceKey(store)]);
  const client = await RpcClient.connect(url, { ...options, auth, device });
  if (client.hello?.deviceToken) await store.set(remoteTokenSecret(url), client.hello.deviceToken);
  return client;
}
