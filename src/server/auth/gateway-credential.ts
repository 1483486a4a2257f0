import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { AuthMode } from '../../shared/config/schema.ts';
import { GatewayError } from '../../shared/errors.ts';
import { ExitCode } from '../../shared/exit-codes.ts';
import { secretFromEnv, type SecretStore } from '../../shared/secrets/secret-store.ts';
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

/**
 * Reads the gateway's credential into `credential`: the environment first,
 * then the profile's store. The token is made on first start, by the process
 * that holds the profile's lock; password mode without a password cannot start.
 */
export async function loadGatewayCredential(credential: GatewayCredential, options: { mode: AuthMode; secrets: SecretStore; profile: string; logger: Logger }): Promise<void> {
  const { mode, secrets, logger } = options;
  let token = secretFromEnv('gateway.token');
  if (!token && mode !== 'none') {
    token = await secrets.get('gateway.token');
    if (!token) {
      token = randomBytes(32).toString('base64url');
      await secrets.set('gateway.token', token);
      logger.info('generated the gateway token');
    }
  }
  const password = secretFromEnv('gateway.password') ?? (mode === 'password' ? await secrets.get('gateway.password') : undefined);
  if (mode === 'password' && !password) {
    throw new GatewayError('gateway.auth.mode is password, but no password is set.', {
      exitCode: ExitCode.invalidConfig,
      hints: [`gateway secrets set gateway.password --profile ${options.profile}   # reads it from stdin`, 'or set GATEWAY_PASSWORD'],
    });
  }
  credential.update(token, password);
}
