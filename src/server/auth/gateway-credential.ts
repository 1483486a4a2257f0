import { createHash, timingSafeEqual } from 'node:crypto';
import type { AuthMode } from '../../shared/config/schema.ts';
import type { ConnectAuth } from '../../shared/protocol/frames.ts';

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/** Compares secrets in constant time, whatever their lengths. */
export function secretEquals(given: string | undefined, expected: string | undefined): boolean {
  if (typeof given !== 'string' || typeof expected !== 'string' || expected.length === 0) return false;
  return timingSafeEqual(digest(given), digest(expected));
}

/**
 * The gateway's own credential under the configured auth mode. The token is
 * always accepted from the host's own CLI; the password only in password mode.
 */
export class GatewayCredential {
  readonly mode: AuthMode;
  private token: string | undefined;
  private password: string | undefined;

  constructor(mode: AuthMode, token: string | undefined, password: string | undefined) {
    this.mode = mode;
    this.token = token;
    this.password = password;
  }

  update(token: string | undefined, password: string | undefined): void {
    this.token = token;
    this.password = password;
  }

  /** Whether a connect frame's auth carries the gateway credential. */
  verify(auth: ConnectAuth | undefined): boolean {
    if (this.mode === 'none') return true;
    if (this.mode === 'password' && secretEquals(auth?.password, this.password)) return true;
    return secretEquals(auth?.token, this.token);
  }

  /** Whether an HTTP bearer value is the gateway credential. */
  verifyBearer(value: string | undefined): boolean {
    if (this.mode === 'none') return true;
    if (this.mode === 'password' && secretEquals(value, this.password)) return true;
    return secretEquals(value, this.token);
  }
}
