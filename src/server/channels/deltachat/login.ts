/**
 * What the engine is told to log in with, from an account's settings: the
 * address, its password (from the secret store), and the IMAP and SMTP
 * servers when given (else the engine finds them itself from the address,
 * as Delta Chat's apps do). TLS is always required; certificates that do not
 * check out are accepted only for servers on this host, and only when asked.
 */
import { createHash } from 'node:crypto';
import { isLoopbackAddress } from '../../../shared/config/exposure.ts';
import type { T } from '@deltachat/jsonrpc-client';
import { isAddress } from './peers.ts';

export interface DeltaChatAccountSettings {
  enabled: boolean;
  address?: string;
  user?: string;
  imap?: string;
  smtp?: string;
  acceptInvalidCertificates: boolean;
  displayName?: string;
  rooms: string[];
}

/** A setting only an operator can fix. */
export class Setup extends Error {}

/** A server address's parts: imap://host:port is STARTTLS, imaps://host:port TLS from the start. */
function serverOf(value: string | undefined, kind: 'imap' | 'smtp'): { host: string; port: number; security: 'ssl' | 'starttls' } | undefined {
  if (!value) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Setup(`the ${kind.toUpperCase()} server ${JSON.stringify(value)} is not an address (${kind}://host:port or ${kind}s://host:port)`);
  }
  const secure = url.protocol === `${kind}s:`;
  if (!secure && url.protocol !== `${kind}:`) throw new Setup(`the ${kind.toUpperCase()} server must be a ${kind}:// or ${kind}s:// address (got ${url.protocol})`);
  const port = url.port ? Number(url.port) : kind === 'imap' ? (secure ? 993 : 143) : (secure ? 465 : 587);
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port, security: secure ? 'ssl' : 'starttls' };
}

const local = (host: string) => isLoopbackAddress(host) || host === 'localhost';

/** The login the engine is given; a Setup error says what is wrong with the settings. */
export function loginOf(settings: DeltaChatAccountSettings, password: string | undefined, where: { address: string; password: string }): T.EnteredLoginParam {
  if (!settings.address || !isAddress(settings.address)) throw new Setup(`set the account's address: gateway config set ${where.address} bot@example.org`);
  if (!password) throw new Setup(`no password: printf %s "$PASSWORD" | gateway secrets set ${where.password}`);
  const imap = serverOf(settings.imap, 'imap');
  const smtp = serverOf(settings.smtp, 'smtp');
  if (settings.acceptInvalidCertificates && !(imap && smtp && local(imap.host) && local(smtp.host))) {
    throw new Setup('acceptInvalidCertificates is refused unless both servers are given and on this host: anyone on the way could read the password and every message');
  }
  return {
    addr: settings.address, password,
    imapServer: imap?.host ?? null, imapPort: imap?.port ?? null, imapSecurity: imap?.security ?? null, imapUser: settings.user ?? null, imapFolder: null,
    smtpServer: smtp?.host ?? null, smtpPort: smtp?.port ?? null, smtpSecurity: smtp?.security ?? null, smtpUser: settings.user ?? null, smtpPassword: null,
    certificateChecks: settings.acceptInvalidCertificates ? 'acceptInvalidCertificates' : 'strict',
  };
}

/** What a login is known by, to tell whether the engine has it already (a digest: the password itself stays in the engine's database alone). */
export function loginDigest(login: T.EnteredLoginParam): string {
  return createHash('sha256').update(JSON.stringify(login)).digest('base64url');
}
