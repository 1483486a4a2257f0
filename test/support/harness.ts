/**
 * The gateway composed in this process on a free loopback port: no profile
 * lock, no keychain (the file secret store in a temporary folder), no
 * detached spawn. A surface is tested in milliseconds.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RpcClient } from '../../src/cli/rpc-client.ts';
import { BUILTIN_MODULES, Daemon } from '../../src/server/daemon.ts';
import type { GatewayModule } from '../../src/server/kernel/module.ts';
import { createLogger } from '../../src/server/logger.ts';
import { documentProblems, effectiveConfig } from '../../src/shared/config/keys.ts';
import { profilePaths } from '../../src/shared/profile.ts';
import { generateDeviceKey, loadDeviceKey } from '../../src/shared/protocol/device-auth.ts';
import { openSecretStore } from '../../src/shared/secrets/secret-store.ts';

export interface TestGateway {
  daemon: Daemon;
  port: number;
  url: string;
  /** The gateway credential. */
  token: string;
  /** An HTTP request to the gateway; `auth: true` sends the gateway credential. */
  request(path: string, init?: RequestInit & { auth?: boolean }): Promise<{ status: number; headers: Headers; body: any }>;
  /** An operator connected over the WebSocket with the gateway credential (paired silently from loopback). */
  operator(): Promise<RpcClient>;
  stop(): Promise<void>;
}


export async function startGateway(options: { modules?: readonly GatewayModule<unknown>[]; config?: Record<string, unknown> } = {}): Promise<TestGateway> {
  const home = mkdtempSync(join(tmpdir(), 'gateway-inproc-'));
  const paths = profilePaths('default', home);
  mkdirSync(paths.dir, { recursive: true, mode: 0o700 });
  const raw = { secrets: { backend: 'file' }, ...options.config };
  const problems = documentProblems(raw);
  if (problems.length > 0) throw new Error(`test configuration is invalid: ${problems.join('; ')}`);
  // The file holds the same settings, so `config set` through the daemon changes them as it would on a host.
  writeFileSync(paths.config, JSON.stringify(raw, null, 2), { mode: 0o600 });
  const log = createLogger({ path: paths.log, level: 'info', maxBytes: 10 * 1024 * 1024, maxFiles: 1, profile: paths.name });
  const secrets = openSecretStore(paths, 'file');
  const daemon = new Daemon({
    paths, config: effectiveConfig(raw), bind: { mode: 'loopback', host: '127.0.0.1', loopback: true }, port: 0, log, secrets,
    modules: options.modules ?? BUILTIN_MODULES, lock: false,
  });
  await daemon.start();
  const token = (await secrets.get('gateway.token'))!;
  const url = `http://127.0.0.1:${daemon.port}`;
  const clients: RpcClient[] = [];
  return {
    daemon,
    port: daemon.port,
    url,
    token,
    async request(path, init = {}) {
      const headers = new Headers(init.headers);
      if (init.auth) headers.set('authorization', `Bearer ${token}`);
      const response = await fetch(`${url}${path}`, { ...init, headers });
      const text = await response.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // not JSON
      }
      return { status: response.status, headers: response.headers, body };
    },
    async operator() {
      const client = await RpcClient.connect(`ws://127.0.0.1:${daemon.port}/`, { auth: { token }, device: loadDeviceKey(generateDeviceKey()) });
      clients.push(client);
      return client;
    },
    async stop() {
      for (const client of clients) client.close();
      await daemon.stop('test done');
      rmSync(home, { recursive: true, force: true });
    },
  };
}
