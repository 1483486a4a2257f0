/**
 * The client side of the MCP authorization specification, over the SDK's
 * auth(): the gateway's OAuthClientProvider (its credentials in the secret
 * store), and login flows whose state is kept server-side, single use, for
 * ten minutes. The SDK does discovery (RFC 9728, RFC 8414 with the OpenID
 * fallback), registration (pre-registered client, Client ID Metadata
 * Document, RFC 7591), PKCE S256, resource indicators (RFC 8707) and the
 * issuer check of the authorization response (RFC 9207).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { OAuthClientProvider, OAuthDiscoveryState, Tool } from '@modelcontextprotocol/client';
import type { McpServerSettings } from '../../shared/config/types.ts';
import type { Store } from '../store/database.ts';
import { pruneRows } from '../store/retention.ts';
import type { KeptClient, McpCredentials } from './credentials.ts';

/** How long a login flow's state stays valid. */
export const FLOW_TTL_MS = 10 * 60_000;

/** Thrown by a provider that may not send anyone to log in: the server needs an interactive login first. */
export class LoginRequired extends Error {
  constructor() {
    super('the server needs a login');
    this.name = 'LoginRequired';
  }
}

/** One login in progress: what the callback leg needs to finish it. */
export interface Flow {
  state: string;
  server: string;
  redirectUrl: string;
  verifier?: string;
  discovery?: OAuthDiscoveryState;
  authorizationUrl?: string;
}

export const MCP_MIGRATIONS = [
  {
    version: 1,
    name: 'mcp oauth flows and tool lists',
    was: { module: 'mcp', version: 1 },
    sql: `
      CREATE TABLE mcp_oauth_flows (
        state_hash TEXT PRIMARY KEY,
        server TEXT NOT NULL,
        redirect_url TEXT NOT NULL,
        verifier TEXT NOT NULL,
        discovery TEXT,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL
      );
      CREATE TABLE mcp_tools (
        server TEXT PRIMARY KEY,
        tools TEXT NOT NULL,
        updated_at BIGINT NOT NULL
      );
    `,
  },
] as const;

const hashState = (state: string) => createHash('sha256').update(state).digest('base64url');

/**
 * What the MCP module keeps in the state database: login flows (a flow's
 * state is stored hashed and taken exactly once) and each server's last tool
 * list.
 */
export class FlowStore {
  private readonly store: Store;
  private readonly now: () => number;

  constructor(store: Store, now: () => number = Date.now) {
    this.store = store;
    this.now = now;
  }

  async save(flow: Flow): Promise<void> {
    const { verifier } = flow;
    if (!verifier) throw new Error('a login flow needs its code verifier');
    const now = this.now();
    await this.store.transaction(async (tx) => {
      await tx.run('DELETE FROM mcp_oauth_flows WHERE expires_at < ?', now);
      await tx.run('INSERT INTO mcp_oauth_flows (state_hash, server, redirect_url, verifier, discovery, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        hashState(flow.state), flow.server, flow.redirectUrl, verifier, flow.discovery ? JSON.stringify(flow.discovery) : null, now, now + FLOW_TTL_MS);
    });
  }

  /** Takes the flow of a state: undefined when it is unknown, already taken or expired. */
  async take(state: string): Promise<Flow | undefined> {
    const row = await this.store.get<{ server: string; redirect_url: string; verifier: string; discovery: string | null; expires_at: number }>(
      'DELETE FROM mcp_oauth_flows WHERE state_hash = ? RETURNING server, redirect_url, verifier, discovery, expires_at', hashState(state));
    if (!row || row.expires_at < this.now()) return undefined;
    return { state, server: row.server, redirectUrl: row.redirect_url, verifier: row.verifier, ...(row.discovery ? { discovery: JSON.parse(row.discovery) as OAuthDiscoveryState } : {}) };
  }

  /** Forgets every flow of a server (it was removed or logged out). */
  async drop(server: string): Promise<void> {
    await this.store.run('DELETE FROM mcp_oauth_flows WHERE server = ?', server);
  }

  async prune(): Promise<number> {
    return pruneRows(this.store, 'mcp_oauth_flows', 'state_hash', 'expires_at < ?', this.now());
  }

  /** The tools an MCP server offered when it was last connected: the gateway offers them before it connects again. */
  async savedTools(server: string): Promise<Tool[]> {
    const row = await this.store.get<{ tools: string }>('SELECT tools FROM mcp_tools WHERE server = ?', server);
    try {
      return row ? (JSON.parse(row.tools) as Tool[]) : [];
    } catch {
      return [];
    }
  }

  async saveTools(server: string, tools: Tool[]): Promise<void> {
    await this.store.run('INSERT INTO mcp_tools (server, tools, updated_at) VALUES (?, ?, ?) ON CONFLICT (server) DO UPDATE SET tools = excluded.tools, updated_at = excluded.updated_at',
      server, JSON.stringify(tools), Date.now());
  }

  /** Forgets what a removed server left: its login flows and tools. */
  async forget(server: string): Promise<void> {
    await this.store.transaction(async (tx) => {
      await tx.run('DELETE FROM mcp_oauth_flows WHERE server = ?', server);
      await tx.run('DELETE FROM mcp_tools WHERE server = ?', server);
    });
  }
}

export interface ProviderOptions {
  credentials: McpCredentials;
  settings: () => McpServerSettings;
  redirectUrl: string;
  clientName: string;
  /** An interactive login in progress; without one, a provider that would send someone to log in throws LoginRequired. */
  flow?: Flow;
  /** Where a background provider keeps the discovery it made, between calls. */
  discovery?: { value?: OAuthDiscoveryState };
  /** Told when the authorization flow drops stored credentials (a refused refresh token, an unknown client). */
  onInvalidate?: (scope: string) => void;
}

/** The gateway's OAuthClientProvider: credentials in the secret store, flow state with the flow. */
export function oauthProvider(options: ProviderOptions): OAuthClientProvider {
  const { credentials, flow } = options;
  const redirectUrl = flow?.redirectUrl ?? options.redirectUrl;
  const discovery = options.discovery ?? {};
  return {
    get redirectUrl() {
      return redirectUrl;
    },
    get clientMetadataUrl() {
      return options.settings().clientMetadataUrl;
    },
    get clientMetadata() {
      const scope = options.settings().scope;
      return {
        client_name: options.clientName,
        redirect_uris: [redirectUrl],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
        ...(scope ? { scope } : {}),
      };
    },
    state: () => flow?.state ?? randomBytes(32).toString('base64url'),
    async clientInformation() {
      const settings = options.settings();
      const kept = await credentials.client();
      if (settings.clientId) {
        const secret = await credentials.clientSecret();
        return { ...(kept?.client_id === settings.clientId ? { issuer: kept.issuer } : {}), client_id: settings.clientId, ...(secret ? { client_secret: secret } : {}) };
      }
      if (!kept) return undefined;
      // A client registered with another callback address cannot finish a login at this one: register again.
      if (kept.client_id !== settings.clientMetadataUrl && kept.redirect_uris && !kept.redirect_uris.includes(redirectUrl)) return undefined;
      return kept as KeptClient & { client_id: string };
    },
    async saveClientInformation(info) {
      const settings = options.settings();
      if (settings.clientId && info.client_id === settings.clientId) {
        // A pre-registered client: keep only which issuer it belongs to (its secret stays where the user put it).
        await credentials.saveClient({ client_id: info.client_id, issuer: info.issuer });
        return;
      }
      await credentials.saveClient({ ...(info as KeptClient), redirect_uris: (info as KeptClient).redirect_uris ?? [redirectUrl] });
    },
    tokens: () => credentials.tokens(),
    async saveTokens(tokens) {
      await credentials.saveTokens(tokens as Parameters<McpCredentials['saveTokens']>[0]);
    },
    redirectToAuthorization(url) {
      if (!flow) throw new LoginRequired();
      flow.authorizationUrl = url.toString();
    },
    saveCodeVerifier(verifier) {
      if (flow) flow.verifier = verifier;
    },
    codeVerifier() {
      if (!flow?.verifier) throw new LoginRequired();
      return flow.verifier;
    },
    saveDiscoveryState(state) {
      if (flow) flow.discovery = state;
      else discovery.value = state;
    },
    discoveryState: () => (flow ? flow.discovery : discovery.value),
    async invalidateCredentials(scope) {
      options.onInvalidate?.(scope);
      // A login in progress never drops the tokens held: a refused code (a replayed or injected one) must not log the gateway out.
      if (flow) {
        if (scope === 'client' || scope === 'all') await credentials.forget('client');
      } else if (scope === 'all' || scope === 'tokens' || scope === 'client') {
        await credentials.forget(scope);
      }
      if (scope === 'discovery' || scope === 'all') {
        if (flow) flow.discovery = undefined;
        else discovery.value = undefined;
      }
      if (scope === 'verifier' && flow) flow.verifier = undefined;
    },
  };
}
