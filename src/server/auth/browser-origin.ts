/**
 * Which browser pages may use the gateway: a page served by the gateway
 * itself on a loopback address, or an origin listed in
 * gateway.controlUi.allowedOrigins. Clients that are not browsers send no
 * Origin and are not concerned.
 */
import { isIP } from 'node:net';

/** An origin as browsers write it: scheme://host[:port], lower case, default ports dropped. */
export function normalizeOrigin(value: string): string | undefined {
  try {
    const url = new URL(value);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
    return url.origin;
  } catch {
    return undefined;
  }
}

const isLoopbackName = (hostname: string): boolean => {
  const bare = hostname.replace(/^\[|\]$/g, '');
  if (bare === 'localhost' || bare.endsWith('.localhost')) return true;
  if (isIP(bare) === 4) return bare.startsWith('127.');
  return bare === '::1';
};

/**
 * Undefined when a request carrying this Origin may proceed, else why not.
 * `host` is the request's Host header: a loopback page must come from this
 * very server (same host and port), not from another program on the host.
 */
export function originRefusal(origin: string | undefined, host: string | undefined, allowed: readonly string[]): string | undefined {
  if (origin === undefined) return undefined;
  const normalized = normalizeOrigin(origin);
  if (normalized === undefined) return `the page's origin ${JSON.stringify(origin.slice(0, 100))} is not an http(s) origin`;
  if (allowed.some((entry) => normalizeOrigin(entry) === normalized)) return undefined;
  const url = new URL(normalized);
  // The page's own server: its host:port as the Host header names it (default ports dropped alike).
  if (isLoopbackName(url.hostname) && host !== undefined && normalizeOrigin(`${url.protocol}//${host}`) === normalized) return undefined;
  return `the origin ${normalized} is not allowed: add it to gateway.controlUi.allowedOrigins`;
}
