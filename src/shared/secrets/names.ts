import { usageError } from '../errors.ts';

/** Secrets a profile can hold. Values never appear in config.json, logs, errors or --json output. */
export const SECRET_NAMES = [
  'gateway.token',
  'gateway.password',
  'webhooks.github.secret',
  'webhooks.github.secret.previous',
  'hooks.token',
  'api.jwt.secret',
  'api.serviceKey',
  'store.password',
  'voice.transcribe.apiKey',
  'voice.speak.apiKey',
  'tools.web.search.brave.apiKey',
  'tools.web.search.tavily.apiKey',
] as const;

/** A channel account's credentials: an IRC password, a bot's token, an app-level token. */
const CHANNEL_PASSWORD = /^channels\.[a-z0-9][a-z0-9_-]{0,31}(\.accounts\.[a-z0-9][a-z0-9_-]{0,31})?\.(password|botToken|appToken|signingSecret|webhookSecret|accessToken|appSecret|verifyToken|cryptoKey)$/;
const PROVIDER_KEY = /^models\.providers\.[a-z0-9][a-z0-9_-]{0,31}\.apiKey$/;
/** An MCP server's static header values and a pre-registered client's secret. */
const MCP_SECRET = /^mcp\.servers\.[a-z0-9][a-z0-9_-]{0,31}\.(header\.[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}|clientSecret)$/;
/** Keys the CLI keeps for itself (device identity, tokens issued to it); not set by hand. */
const INTERNAL = /^(device\.(key|token)(\.[A-Za-z0-9_.:-]+)?|tokens\.saved\.[A-Za-z0-9_-]+|mcp\.servers\.[a-z0-9][a-z0-9_-]{0,31}\.(oauth|client))$/;

/** Environment variables that override a secret; they are read, never persisted. */
export const SECRET_ENV: Readonly<Record<string, string>> = {
  'gateway.token': 'GATEWAY_TOKEN',
  'gateway.password': 'GATEWAY_PASSWORD',
  'webhooks.github.secret': 'GATEWAY_WEBHOOK_SECRET',
  'hooks.token': 'GATEWAY_HOOKS_TOKEN',
};

export const isUserSecretName = (name: string): boolean =>
  (SECRET_NAMES as readonly string[]).includes(name) || CHANNEL_PASSWORD.test(name) || PROVIDER_KEY.test(name) || MCP_SECRET.test(name);

export const isSecretName = (name: string): boolean => isUserSecretName(name) || INTERNAL.test(name);

export function assertUserSecretName(name: string): string {
  if (!isUserSecretName(name) || name.endsWith('.previous')) {
    throw usageError(`Unknown secret ${JSON.stringify(name)}. Known: ${SECRET_NAMES.filter((n) => !n.endsWith('.previous')).join(', ')}, channels.<id>.password|botToken|appToken|signingSecret|webhookSecret|accessToken|appSecret|verifyToken|cryptoKey (also under channels.<id>.accounts.<account>), models.providers.<id>.apiKey, mcp.servers.<name>.header.<Header>, mcp.servers.<name>.clientSecret.`);
  }
  return name;
}
