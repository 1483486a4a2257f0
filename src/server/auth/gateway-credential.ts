import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { AuthMode } from '../../shared/config/schema.ts';
import { GatewayError } from '../../shared/errors.ts';
import { secretFromEnv, type SecretStore } from '../../shared/secrets/secret-store.ts';
import type { ConnectAuth } from '../../shared/protocol/frames.ts';

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/** A secret kept as its digest, made once, that values are compared with in constant time whatever their lengths (an empty secret matches nothing). */
class KeptSecret {
  private readonly kept: Buffer | undefined;

  constructor(secret: string | undefined) {
    this.kept = typeof secret === 'string' && secret.length > 0 ? digest(secret) : undefined;
  }

  matches(given: string | undefined): boolean {
    return this.kept !== undefined && typeof given === 'string' && timingSafeEqual(digest(given), this.kept);
  }
}

/** Compares secrets in constant time, whatever their lengths. */
export const secretEquals = (given: string | undefined, expected: string | undefined): boolean => new KeptSecret(expected).matches(given);

/**
 * The gateway's own credential under the configured auth mode. The token is
 * always accepted from the host's own CLI; the password only in password mode.
 */
export class GatewayCredential {
  readonly mode: AuthMode;
  // Kept as digests: every request's credential is compared with them, and the secrets need not be hashed again each time.
  private token: KeptSecret;
  private password: KeptSecret;

  constructor(mode: AuthMode, token: string | undefined, password: string | undefined) {
    this.mode = mode;
    this.token = new KeptSecret(token);
    this.password = new KeptSecret(password);
  }

  update(token: string | undefined, password: string | undefined): void {
    this.token = new KeptSecret(token);
    this.password = new KeptSecret(password);
  }

  /** Whether a connect frame's auth carries the gateway credential. */
  verify(auth: ConnectAuth | undefined): boolean {
    if (this.mode === 'none') return true;
    if (this.mode === 'password' && this.password.matches(auth?.password)) return true;
    return this.token.matches(auth?.token);
  }

  /** Whether an HTTP bearer value is the gateway credential. */
  verifyBearer(value: string | undefined): boolean {
    if (this.mode === 'none') return true;
    if (this.mode === 'password' && this.password.matches(value)) return true;
    return this.token.matches(value);
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
      kind: 'invalid_config',
      hints: [`gateway secrets set gateway.password --profile ${options.profile}   # reads it from stdin`, 'or set GATEWAY_PASSWORD'],
    });
  }
  credential.update(token, password);
}
