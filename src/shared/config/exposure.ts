import { existsSync, readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { configError } from '../errors.ts';
import type { BindMode } from './schema.ts';
import { BIND_MODES } from './schema.ts';
import type { GatewayConfig } from './types.ts';

export interface BindTarget {
  mode: BindMode;
  host: string;
  /** Only loopback clients can reach it. */
  loopback: boolean;
}

export function isLoopbackAddress(address: string): boolean {
  const plain = address.startsWith('::ffff:') ? address.slice(7) : address;
  return plain === '127.0.0.1' || plain === '::1' || plain === 'localhost' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(plain);
}

/** Whether this process runs inside a container (Docker, Podman, Kubernetes, LXC). */
export function inContainer(): boolean {
  if (process.env.container || existsSync('/.dockerenv') || existsSync('/run/.containerenv')) return true;
  try {
    return /docker|kubepods|containerd|lxc|libpod/.test(readFileSync('/proc/1/cgroup', 'utf8'));
  } catch {
    return false;
  }
}

const inCgnat = (address: string): boolean => {
  const [a, b] = address.split('.').map(Number);
  return a === 100 && b !== undefined && b >= 64 && b <= 127;
};

function localAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((entry) => entry.address));
}

export function parseBindMode(value: string): BindMode {
  if (!(BIND_MODES as readonly string[]).includes(value)) {
    throw configError(`Unknown bind mode ${JSON.stringify(value)}: use one of ${BIND_MODES.join(', ')}.`);
  }
  return value as BindMode;
}

/** Resolves a bind mode to the one address the daemon listens on; never a wildcard where a specific address was asked for. */
export function resolveBind(mode: BindMode, config: GatewayConfig): BindTarget {
  switch (mode) {
    case 'loopback':
      return { mode, host: '127.0.0.1', loopback: true };
    case 'lan':
      return { mode, host: '0.0.0.0', loopback: false };
    case 'auto':
      return inContainer() ? { mode, host: '0.0.0.0', loopback: false } : { mode, host: '127.0.0.1', loopback: true };
    case 'tailnet': {
      const address = localAddresses().find((candidate) => isIP(candidate) === 4 && inCgnat(candidate));
      if (!address) {
        throw configError('gateway.bind is tailnet, but this host has no address in 100.64.0.0/10 (is the overlay network up?).', [
          'bring the tailnet up, or choose another mode: gateway config set gateway.bind loopback',
        ]);
      }
      return { mode, host: address, loopback: false };
    }
    case 'custom': {
      const host = config.gateway.customBindHost;
      if (!host) {
        throw configError('gateway.bind is custom, but gateway.customBindHost is not set.', [
          'gateway config set gateway.customBindHost 127.0.0.1',
        ]);
      }
      const wildcard = host === '0.0.0.0' || host === '::';
      if (!isIP(host) || (!wildcard && !localAddresses().includes(host))) {
        throw configError(`gateway.customBindHost ${host} is not an address of this host.`, [
          `pick one of: ${localAddresses().join(', ')}`,
        ]);
      }
      return { mode, host, loopback: isLoopbackAddress(host) };
    }
  }
}

/** The exposure rules, checked before anything listens. Each problem names the setting to change. */
export function exposureProblems(config: GatewayConfig, bind: BindTarget): string[] {
  const problems: string[] = [];
  const { auth, overlay, controlUi, trustedProxies } = config.gateway;
  const where = `gateway.bind ${bind.mode} (${bind.host})`;
  if (!bind.loopback && auth.mode === 'none') {
    problems.push(`${where} reaches beyond loopback, so gateway.auth.mode cannot be none: set gateway.auth.mode to token or password, or gateway.bind to loopback`);
  }
  if (auth.mode === 'trusted-proxy' && trustedProxies.length === 0) {
    problems.push('gateway.auth.mode is trusted-proxy, but gateway.trustedProxies is empty: list the proxy addresses (CIDR) in gateway.trustedProxies');
  }
  if (overlay.mode !== 'off' && !bind.loopback) {
    problems.push(`gateway.overlay.mode ${overlay.mode} needs gateway.bind loopback (it is ${bind.mode})`);
  }
  if (overlay.mode === 'funnel' && auth.mode !== 'password') {
    problems.push('gateway.overlay.mode funnel exposes the gateway publicly and needs gateway.auth.mode password');
  }
  if (controlUi.enabled && !bind.loopback && controlUi.allowedOrigins.length === 0 && auth.mode === 'none') {
    problems.push('the Control UI on a non-loopback bind needs gateway.controlUi.allowedOrigins or authentication (gateway.auth.mode)');
  }
  return problems;
}

export function assertExposure(config: GatewayConfig, bind: BindTarget): void {
  const problems = exposureProblems(config, bind);
  if (problems.length > 0) throw configError(`Refusing to start: ${problems.join('; ')}.`);
}
