/**
 * An MCP server's credentials in the profile's secret store: its OAuth tokens
 * (mcp.servers.<name>.oauth), the client the gateway registered with its
 * authorization server (mcp.servers.<name>.client), a pre-registered client's
 * secret and the values of its static headers. Read once, then kept in memory;
 * every change is written through.
 */
import type { SecretStore } from '../../shared/secrets/secret-store.ts';
import type { McpServerSettings } from '../../shared/config/types.ts';

/** OAuth tokens as the gateway keeps them: the token response, and when the access token runs out. */
export interface KeptTokens {
  access_token: string;
  token_type: string;
  refresh_token?: string;
  expires_in?: number;
  scope?: string;
  id_token?: string;
  issuer?: string;
  /** When the access token expires (ms since 1970), from expires_in at the time it was received. */
  expiresAt?: number;
  /** When these tokens were received. */
  receivedAt: number;
}

/** A client registration: what the authorization server answered, and the callback it was registered with. */
export interface KeptClient {
  client_id: string;
  client_secret?: string;
  issuer?: string;
  redirect_uris?: string[];
  [field: string]: unknown;
}

const parse = <T>(value: string | undefined): T | undefined => {
  if (!value) return undefined;
  try {
    return JSON.parse(value) as T;
  } catch {
    return undefined;
  }
};

export class McpCredentials {
  private readonly secrets: SecretStore;
  readonly name: string;
  private loaded = false;
  private tokenCache: KeptTokens | undefined;
  private clientCache: KeptClient | undefined;

  constructor(secrets: SecretStore, name: string) {
    this.secrets = secrets;
    this.name = name;
  }

  private key(what: string): string {
    return `mcp.servers.${this.name}.${what}`;
  }

  private async load(): Promise<void> {
    if (this.loaded) return;
    const [tokens, client] = await Promise.all([this.secrets.get(this.key('oauth')), this.secrets.get(this.key('client'))]);
    this.tokenCache = parse<KeptTokens>(tokens);
    this.clientCache = parse<KeptClient>(client);
    this.loaded = true;
  }

  async tokens(): Promise<KeptTokens | undefined> {
    await this.load();
    return this.tokenCache;
  }

  async saveTokens(tokens: Omit<KeptTokens, 'receivedAt' | 'expiresAt'>, now = Date.now()): Promise<KeptTokens> {
    await this.load();
    // A refresh answer may leave the refresh token out: the one held stays valid (RFC 6749 §6).
    const refresh = tokens.refresh_token ?? (this.tokenCache?.access_token !== tokens.access_token ? this.tokenCache?.refresh_token : undefined);
    const kept: KeptTokens = {
      ...tokens,
      ...(refresh ? { refresh_token: refresh } : {}),
      receivedAt: now,
      ...(typeof tokens.expires_in === 'number' && tokens.expires_in > 0 ? { expiresAt: now + tokens.expires_in * 1000 } : {}),
    };
    await this.secrets.set(this.key('oauth'), JSON.stringify(kept));
    this.tokenCache = kept;
    return kept;
  }

  async client(): Promise<KeptClient | undefined> {
    await this.load();
    return this.clientCache;
  }

  async saveClient(client: KeptClient): Promise<void> {
    await this.load();
    await this.secrets.set(this.key('client'), JSON.stringify(client));
    this.clientCache = client;
  }

  async forget(what: 'tokens' | 'client' | 'all'): Promise<void> {
    await this.load();
    if (what !== 'client') {
      await this.secrets.delete(this.key('oauth'));
      this.tokenCache = undefined;
    }
    if (what !== 'tokens') {
      await this.secrets.delete(this.key('client'));
      this.clientCache = undefined;
    }
  }

  /** The secret of a pre-registered confidential client, if one is kept. */
  clientSecret(): Promise<string | undefined> {
    return this.secrets.get(this.key('clientSecret'));
  }

  /** The static headers, each value from its secret; a missing secret is named. */
  async headers(settings: McpServerSettings): Promise<{ headers: Record<string, string>; missing: string[] }> {
    const headers: Record<string, string> = {};
    const missing: string[] = [];
    for (const header of settings.headers) {
      const value = await this.secrets.get(this.key(`header.${header}`));
      if (value === undefined) missing.push(this.key(`header.${header}`));
      else headers[header] = value;
    }
    return { headers, missing };
  }

  /** Text fit to show (an error's message, a reason): no secret value of the server, no bearer token or JWT, one line, bounded. */
  async redact(text: string, settings: McpServerSettings): Promise<string> {
    await this.load();
    const { headers } = await this.headers(settings);
    const values = [
      this.tokenCache?.access_token, this.tokenCache?.refresh_token, this.tokenCache?.id_token, this.clientCache?.client_secret,
      await this.clientSecret(), ...Object.values(headers),
    ].filter((value): value is string => typeof value === 'string' && value.length >= 4);
    let clean = text.replace(/\s+/g, ' ').trim();
    for (const value of values) clean = clean.split(value).join('[redacted]');
    clean = clean.replace(/\b(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi, '$1[redacted]').replace(/\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g, '[redacted]');
    return clean.length > 300 ? `${clean.slice(0, 297)}...` : clean;
  }

  /** Drops what is held in memory, so the next read goes to the store (a secret changed outside). */
  reset(): void {
    this.loaded = false;
  }
}
