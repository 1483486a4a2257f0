import { usageError } from './errors.ts';
import { type BindTarget, parseBindMode, resolveBind } from './config/exposure.ts';
import type { BindMode } from './config/schema.ts';
import type { GatewayConfig } from './config/types.ts';
import { derivedPort } from './profile.ts';

export interface ListenOverrides {
  port?: number;
  bind?: string;
}

export function parsePort(value: string | number, origin: string): number {
  const port = typeof value === 'number' ? value : Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65535 || (typeof value === 'string' && !/^\d+$/.test(value.trim()))) {
    throw usageError(`${origin} must be a port number from 1 to 65535 (got ${JSON.stringify(value)}).`);
  }
  return port;
}

/** Port: --port, else GATEWAY_PORT, else gateway.port, else the profile's default. Bind: --bind, else gateway.bind. */
export function resolveListen(profile: string, config: GatewayConfig, overrides: ListenOverrides, env = process.env): { port: number; bind: BindTarget } {
  const port = overrides.port
    ?? (env.GATEWAY_PORT ? parsePort(env.GATEWAY_PORT, 'GATEWAY_PORT') : undefined)
    ?? config.gateway.port
    ?? derivedPort(profile);
  const mode: BindMode = overrides.bind ? parseBindMode(overrides.bind) : config.gateway.bind;
  return { port, bind: resolveBind(mode, config) };
}

/** The address a local client uses to reach a daemon listening on host. */
export function connectHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '::1';
  return host;
}

export const httpUrl = (host: string, port: number): string => {
  const h = connectHost(host);
  return `http://${h.includes(':') ? `[${h}]` : h}:${port}`;
};
