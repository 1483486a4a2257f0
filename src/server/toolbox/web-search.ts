/**
 * web.search: a query sent to the search provider the operator chose
 * (tools.web.search.provider), its results as title, address and snippet.
 *
 * - searxng: the operator's own SearXNG instance (tools.web.search.baseUrl),
 *   `GET /search?q=...&format=json`; no key. The instance must allow the JSON
 *   format (`search.formats` in its settings.yml), else it answers 403.
 * - brave: the Brave Search API, `GET /res/v1/web/search?q=...&count=N` with
 *   the key in `X-Subscription-Token` (the secret tools.web.search.brave.apiKey).
 * - tavily: the Tavily API, `POST /search` with `{query, max_results}` and the
 *   key as a bearer token (the secret tools.web.search.tavily.apiKey).
 *
 * The provider's address is the operator's setting, like a model provider's,
 * so it is not held to the address guard (a SearXNG on this host is usual).
 * What a provider answers is reported plainly: a key it refuses, a plan used
 * up, a rate limit (429 with Retry-After, from its own headers), its own
 * error's text; never the key.
 */
import type { SearchProvider } from '../../shared/config/schema.ts';
import { DomainError, rateLimited } from '../kernel/errors.ts';
import { upstreamFetch } from '../kernel/upstream-fetch.ts';

/** The public addresses of the keyed providers' APIs (tools.web.search.baseUrl replaces them). */
export const PROVIDER_BASES: Record<Exclude<SearchProvider, 'searxng'>, string> = {
  brave: 'https://api.search.brave.com',
  tavily: 'https://api.tavily.com',
};

export interface SearchSettings {
  provider?: SearchProvider;
  baseUrl?: string;
  count: number;
  timeoutMs: number;
}

export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
}

/** Most bytes of a provider's answer read. */
const MAX_ANSWER_BYTES = 2 * 1024 * 1024;
/** Longest snippet kept per result. */
const MAX_SNIPPET = 1000;
/** Most results any provider is asked for. */
export const MAX_RESULTS = 20;

export const secretOfProvider = (provider: SearchProvider): string => `tools.web.search.${provider}.apiKey`;

const NAMES: Record<SearchProvider, string> = { searxng: 'SearXNG', brave: 'Brave Search', tavily: 'Tavily' };

const failed = (message: string, code = 'search_failed', status?: number) =>
  new DomainError('upstream', message, { code, ...(status ? { details: { status } } : {}) });

/** The provider's address for a path, or why there is none. */
function endpoint(settings: SearchSettings, provider: SearchProvider, path: string): URL {
  const base = settings.baseUrl ?? (provider === 'searxng' ? undefined : PROVIDER_BASES[provider]);
  if (!base) {
    throw new DomainError('unavailable', 'web.search uses SearXNG but no instance is set: gateway config set tools.web.search.baseUrl https://searx.example.org', { code: 'search_unconfigured' });
  }
  const url = new URL(base);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}${path}`;
  return url;
}

/** Seconds to wait before asking again, from Retry-After or the provider's own rate-limit headers; undefined when none says. */
function retryAfterMs(headers: Headers): number | undefined {
  const retry = headers.get('retry-after');
  if (retry) {
    const seconds = Number(retry);
    if (Number.isFinite(seconds)) return Math.max(0, seconds) * 1000;
    const at = Date.parse(retry);
    if (Number.isFinite(at)) return Math.max(0, at - Date.now());
  }
  // Brave: X-RateLimit-Reset lists the seconds until each window resets (per second, per month); the first window that is used up decides.
  const reset = headers.get('x-ratelimit-reset')?.split(',').map((part) => Number(part.trim()));
  const remaining = headers.get('x-ratelimit-remaining')?.split(',').map((part) => Number(part.trim()));
  if (reset && reset.every(Number.isFinite)) {
    const spent = remaining?.findIndex((left) => left === 0) ?? -1;
    return (reset[spent >= 0 ? spent : 0] ?? 1) * 1000;
  }
  return undefined;
}

/** The provider's own words about a failure, from the error shapes each documents, shortened. */
function providerMessage(body: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    const line = body.replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim();
    return line ? line.slice(0, 300) : undefined;
  }
  const record = (parsed ?? {}) as Record<string, any>;
  // Brave: {type: "ErrorResponse", error: {code, detail}}; Tavily: {detail: {error}} or {detail: "..."}; others: {error} or {message}.
  const candidates = [
    record.error?.detail && record.error?.code ? `${record.error.detail} (${record.error.code})` : record.error?.detail,
    record.detail?.error, typeof record.detail === 'string' ? record.detail : undefined,
    typeof record.error === 'string' ? record.error : record.error?.message, record.message,
  ];
  const found = candidates.find((value) => typeof value === 'string' && value.trim());
  return found ? String(found).slice(0, 300) : undefined;
}

/** Reads an answer's body up to a bound. */
async function bodyOf(response: Response): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > MAX_ANSWER_BYTES) throw failed(`The search provider answered more than ${MAX_ANSWER_BYTES} bytes.`);
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
    await response.body?.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Plain text of a snippet (SearXNG and Brave mark matches up with <strong>), shortened. */
const plain = (text: unknown): string => (typeof text === 'string'
  ? text.replace(/<[^>]*>/g, '').replace(/&(amp|lt|gt|quot|#39|#x27);/g, (entity) => ({ '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#39;': '\'', '&#x27;': '\'' })[entity] ?? entity)
    .replace(/\s+/g, ' ').trim().slice(0, MAX_SNIPPET)
  : '');

/** Results from a list of items, each with a title, an http(s) address and a snippet under the given names. */
function resultsOf(items: unknown, snippet: string, count: number): SearchResult[] {
  if (!Array.isArray(items)) return [];
  const results: SearchResult[] = [];
  for (const item of items as Record<string, unknown>[]) {
    if (results.length >= count) break;
    if (!item || typeof item.url !== 'string' || !/^https?:\/\//i.test(item.url)) continue;
    results.push({ title: plain(item.title) || item.url, url: item.url, snippet: plain(item[snippet]) });
  }
  return results;
}

/**
 * Asks the configured provider. `key` gives the provider's API key when it
 * needs one (read from the secret store only then).
 */
export async function search(query: string, count: number, settings: SearchSettings, key: (provider: SearchProvider) => Promise<string | undefined>): Promise<{ provider: SearchProvider; query: string; results: SearchResult[] }> {
  const provider = settings.provider;
  if (!provider) {
    throw new DomainError('unavailable', 'web.search has no provider: gateway config set tools.web.search.provider searxng (with tools.web.search.baseUrl), brave or tavily (with its key: gateway secrets set tools.web.search.<provider>.apiKey).', { code: 'search_unconfigured' });
  }
  const name = NAMES[provider];
  let url: URL;
  const init: RequestInit & { headers: Record<string, string> } = { method: 'GET', headers: { accept: 'application/json' } };
  if (provider === 'searxng') {
    url = endpoint(settings, provider, '/search');
    url.searchParams.set('q', query);
    url.searchParams.set('format', 'json');
  } else {
    const apiKey = await key(provider);
    if (!apiKey) {
      throw new DomainError('unavailable', `web.search uses ${name} but its API key is not set: gateway secrets set ${secretOfProvider(provider)} (the key on stdin).`, { code: 'search_unconfigured' });
    }
    if (provider === 'brave') {
      url = endpoint(settings, provider, '/res/v1/web/search');
      url.searchParams.set('q', query);
      url.searchParams.set('count', String(count));
      init.headers['x-subscription-token'] = apiKey;
    } else {
      url = endpoint(settings, provider, '/search');
      init.method = 'POST';
      init.headers.authorization = `Bearer ${apiKey}`;
      init.headers['content-type'] = 'application/json';
      init.body = JSON.stringify({ query, max_results: count, search_depth: 'basic' });
    }
  }
  const signal = AbortSignal.timeout(settings.timeoutMs);
  let response: Response;
  let text: string;
  try {
    response = await upstreamFetch(url, { ...init, signal }, undefined);
    text = await bodyOf(response);
  } catch (error) {
    if (error instanceof DomainError) throw error;
    if (signal.aborted) throw failed(`${name} did not answer within ${settings.timeoutMs} ms (tools.web.search.timeoutMs).`, 'search_timeout');
    const cause = (error as { cause?: NodeJS.ErrnoException }).cause;
    throw failed(`${name} at ${url.host} could not be reached${cause?.code ? ` (${cause.code})` : ''}.`);
  }
  const said = () => providerMessage(text);
  const { status } = response;
  if (status === 429) {
    const wait = retryAfterMs(response.headers) ?? 60_000;
    throw rateLimited(wait, `${name} says too many searches${said() ? ` (${said()})` : ''}`);
  }
  if (status === 401 || status === 403 || (provider === 'brave' && status === 422 && /SUBSCRIPTION_TOKEN/i.test(text))) {
    if (provider === 'searxng') {
      throw failed(`SearXNG at ${url.host} refused the search (${status})${said() ? `: ${said()}` : ''}; its settings.yml must list json under search.formats.`, 'search_refused', status);
    }
    throw failed(`${name} refused the API key (${status})${said() ? `: ${said()}` : ''}; set the right one: gateway secrets set ${secretOfProvider(provider)}`, 'search_key_refused', status);
  }
  if (provider === 'tavily' && (status === 432 || status === 433)) {
    throw failed(`Tavily refused the search: ${status === 432 ? 'the plan\'s usage limit is reached' : 'the pay-as-you-go limit is reached'}${said() ? ` (${said()})` : ''}.`, 'search_plan_limit', status);
  }
  if (status < 200 || status >= 300) {
    // The provider turned the query itself down (a 400 or 422): the caller's to change; anything else failed the call.
    const what = `${name} answered ${status}${said() ? `: ${said()}` : ''}.`;
    if (status === 400 || status === 422) throw new DomainError('invalid', what, { code: 'search_refused', details: { status } });
    throw failed(what, 'search_failed', status);
  }
  let body: Record<string, any>;
  try {
    body = JSON.parse(text) as Record<string, any>;
  } catch {
    throw failed(`${name} answered something that is not JSON${provider === 'searxng' ? ' (is tools.web.search.baseUrl the instance\'s address?)' : ''}.`);
  }
  const results = provider === 'searxng' ? resultsOf(body.results, 'content', count)
    : provider === 'brave' ? resultsOf(body.web?.results, 'description', count)
      : resultsOf(body.results, 'content', count);
  return { provider, query, results };
}
