/**
 * An MCP server's OAuth login, run by the gateway: started for a server (the
 * authorization URL a browser goes to, its state kept server-side) and
 * finished with the authorization response the callback brings back (state
 * taken once, iss checked, the code exchanged with the verifier and the
 * resource). Failures say what the authorization server said, secrets left out.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { McpServerInfo } from '../../shared/protocol/results.ts';
import { DomainError } from '../kernel/errors.ts';
import type { AuditFields } from '../store/database.ts';
import { type Flow, type FlowStore, oauthProvider } from './oauth.ts';
import { loadMcpSdk, type McpSdk } from './sdk.ts';
import type { McpServerEntry, McpServers } from './servers.ts';

export const CALLBACK_PATH = '/oauth/mcp/callback';

/** What a callback carries: the authorization response's parameters. */
export interface CallbackInput {
  code?: string;
  state?: string;
  iss?: string;
  error?: string;
  error_description?: string;
}

const text = (value: unknown, max: number): string | undefined => (typeof value === 'string' && value.length > 0 ? value.slice(0, max) : undefined);

/** A callback's body checked: an object of strings, each bounded. */
export function callbackInput(raw: unknown): CallbackInput {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new DomainError('invalid', 'The body must be an object with code and state.');
  const body = raw as Record<string, unknown>;
  for (const key of ['code', 'state', 'iss', 'error', 'error_description']) {
    if (body[key] !== undefined && typeof body[key] !== 'string') throw new DomainError('invalid', `${key} must be a string.`);
  }
  if (typeof body.code === 'string' && body.code.length > 4096) throw new DomainError('invalid', 'code is too long.');
  if (typeof body.state === 'string' && body.state.length > 512) throw new DomainError('invalid', 'state is too long.');
  return {
    code: text(body.code, 4096), state: text(body.state, 512), iss: text(body.iss, 2048),
    error: text(body.error, 128), error_description: text(body.error_description, 500),
  };
}

/** Where the authorization server sends the browser back to: mcp.callbackUrl, else the daemon's own address (a wildcard bind as loopback). */
export function callbackUrl(configured: string | undefined, daemonUrl: string): string {
  if (configured) return configured;
  const base = new URL(daemonUrl);
  if (base.hostname === '0.0.0.0' || base.hostname === '[::]') base.hostname = '127.0.0.1';
  return new URL(CALLBACK_PATH, base).toString();
}

/** An OAuth error code fit to pass on: letters, digits and underscores, bounded. */
const errorCode = (raw: string) => raw.replace(/[^a-z0-9_]/gi, '').slice(0, 64) || 'oauth_error';

export interface McpLoginsDeps {
  servers: Pick<McpServers, 'find'>;
  flows: Pick<FlowStore, 'save' | 'take'>;
  audit: (kind: string, fields: AuditFields) => Promise<void>;
  log: Logger;
  clientName: string;
  callbackUrl: () => string;
  /** The MCP client library (its auth() and error classes). */
  sdk?: () => Promise<McpSdk>;
}

export class McpLogins {
  private readonly deps: McpLoginsDeps;
  private readonly sdk: () => Promise<McpSdk>;

  constructor(deps: McpLoginsDeps) {
    this.deps = deps;
    this.sdk = deps.sdk ?? loadMcpSdk;
  }

  /** Starts a login: the authorization URL to send a browser to, or none when the server needs no login. */
  async start(name: string): Promise<{ authorizationUrl?: string }> {
    const entry = this.deps.servers.find(name);
    const info = await entry.connection.info();
    if (info.state === 'connected' && info.auth !== 'oauth' && !entry.connection.challenged) return {};
    const sdk = await this.sdk();
    const flow: Flow = { state: randomBytes(32).toString('base64url'), server: name, redirectUrl: this.deps.callbackUrl() };
    const provider = oauthProvider({ credentials: entry.credentials, settings: () => entry.settings, redirectUrl: flow.redirectUrl, clientName: this.deps.clientName, flow });
    let result: string;
    try {
      result = await sdk.auth(provider, { serverUrl: entry.settings.url, forceReauthorization: true, ...(entry.settings.scope ? { scope: entry.settings.scope } : {}) });
    } catch (error) {
      throw await this.failure(sdk, error, `Could not start the login with MCP server ${name}`, entry);
    }
    if (result === 'REDIRECT' && flow.authorizationUrl) {
      await this.deps.flows.save(flow);
      this.deps.log.info({ server: name }, 'MCP login started');
      return { authorizationUrl: flow.authorizationUrl };
    }
    await entry.connection.connect();
    return {};
  }

  /** Finishes a login with the authorization response: state taken once, iss checked, code exchanged with the verifier and the resource. */
  async finish(input: CallbackInput, address: string): Promise<McpServerInfo> {
    if (!input.state) throw new DomainError('invalid', 'The authorization response has no state.', { code: 'invalid_state' });
    const flow = await this.deps.flows.take(input.state);
    if (!flow) {
      this.deps.log.warn({ address }, 'MCP login callback with an unknown, used or expired state');
      throw new DomainError('invalid', 'This login is unknown, already finished or expired (a login lasts 10 minutes); start it again with gateway mcp login <server>.', { code: 'invalid_state' });
    }
    const entry = this.deps.servers.find(flow.server);
    if (input.error) {
      const code = errorCode(input.error);
      await this.deps.audit('mcp.login.refused', { subject: flow.server, address, detail: { error: code } });
      throw new DomainError('invalid', `The authorization server answered ${code}${input.error_description ? `: ${input.error_description.replace(/[\r\n]+/g, ' ')}` : ''}.`, { code });
    }
    if (!input.code) throw new DomainError('invalid', 'The authorization response has no code.', { code: 'invalid_request' });
    const sdk = await this.sdk();
    const provider = oauthProvider({ credentials: entry.credentials, settings: () => entry.settings, redirectUrl: flow.redirectUrl, clientName: this.deps.clientName, flow });
    try {
      await sdk.auth(provider, { serverUrl: entry.settings.url, authorizationCode: input.code, ...(input.iss ? { iss: input.iss } : {}), ...(entry.settings.scope ? { scope: entry.settings.scope } : {}) });
    } catch (error) {
      const failure = await this.failure(sdk, error, `The login with MCP server ${flow.server} failed`, entry);
      await this.deps.audit('mcp.login.refused', { subject: flow.server, address, detail: { error: failure.code } });
      throw failure;
    }
    await this.deps.audit('mcp.login', { subject: flow.server, address });
    this.deps.log.info({ server: flow.server }, 'MCP login finished');
    await entry.connection.connect();
    return entry.connection.info();
  }

  /** An OAuth failure as the caller sees it: the authorization server's own error passed on, secrets left out. */
  async failure(sdk: McpSdk, error: unknown, what: string, entry: Pick<McpServerEntry, 'credentials' | 'settings'>): Promise<DomainError> {
    if (error instanceof DomainError) return error;
    if (sdk.IssuerMismatchError.isInstance(error) || sdk.AuthorizationServerMismatchError.isInstance(error)) {
      return new DomainError('invalid', `${what}: the authorization response did not come from the authorization server this login started with (issuer mismatch); nothing was stored. Start again.`, { code: 'issuer_mismatch' });
    }
    if (sdk.OAuthError.isInstance(error)) {
      const code = errorCode(String((error as { code?: unknown }).code ?? 'oauth_error'));
      const message = (error as Error).message;
      return new DomainError('invalid', `${what}: the authorization server answered ${code}${message ? `: ${await entry.credentials.redact(message, entry.settings)}` : ''}.`, { code });
    }
    const message = await entry.credentials.redact((error as Error)?.message ?? String(error), entry.settings);
    this.deps.log.warn({ err: message }, what);
    return new DomainError('upstream', `${what}: ${message}.`);
  }
}
