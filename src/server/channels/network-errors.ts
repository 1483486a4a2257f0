/**
 * What a failed network call met, said so an operator can act on it: where
 * (the host, or host:port) and why (DNS lookup failed, connection refused,
 * TLS error, timed out, closed by the other side), instead of the bare
 * "fetch failed" Node's fetch throws. The reason is read from the error's
 * causes: undici puts the system error (code, hostname, address, port) in
 * `err.cause`; client libraries wrap theirs (grammY's HttpError in `.error`,
 * Slack's request error in `.original`, axios in `.cause`, several addresses
 * tried at once in an AggregateError's `.errors`).
 *
 * Never a URL's path or query: bot tokens travel there (Telegram's), so
 * addresses are told as host:port only, and any URL left in a message is
 * blanked.
 */

/** What one error in the chain says of itself. */
interface Facts {
  code?: string;
  name?: string;
  message?: string;
  hostname?: string;
  address?: string;
  port?: number;
}

/** How deep the chain of causes is followed. */
const MAX_DEPTH = 6;

const DNS = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'EAI_NODATA']);
const CLOSED = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);
const TIMED_OUT = new Set(['ETIMEDOUT', 'ESOCKETTIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
const UNREACHABLE = new Set(['EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENETDOWN', 'EADDRNOTAVAIL']);
const TLS = /^(?:ERR_TLS_|ERR_SSL_|ERR_OSSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH)/;

/** Every error the failure is made of, outermost first. */
function chain(error: unknown): Facts[] {
  const found: Facts[] = [];
  const seen = new Set<unknown>();
  const visit = (value: unknown, depth: number) => {
    if (typeof value !== 'object' || value === null || seen.has(value) || depth > MAX_DEPTH) return;
    seen.add(value);
    const item = value as Record<string, unknown>;
    found.push({
      ...(typeof item.code === 'string' ? { code: item.code } : {}),
      ...(typeof item.name === 'string' ? { name: item.name } : {}),
      ...(typeof item.message === 'string' ? { message: item.message } : {}),
      ...(typeof item.hostname === 'string' ? { hostname: item.hostname } : {}),
      ...(typeof item.address === 'string' ? { address: item.address } : {}),
      ...(typeof item.port === 'number' ? { port: item.port } : {}),
    });
    visit(item.cause, depth + 1);
    visit(item.error, depth + 1);
    visit(item.original, depth + 1);
    if (Array.isArray(item.errors)) for (const inner of item.errors) visit(inner, depth + 1);
  };
  visit(error, 0);
  return found;
}

/** A message with any URL in it blanked (a token may be in its path). */
const withoutUrls = (message: string) => message.replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+/gi, '<url>');

/** host:port of an address (the port its scheme implies when it names none); undefined when it is not one. */
function hostOf(address: string | URL | undefined): { host: string; hostname: string } | undefined {
  if (address === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(String(address));
  } catch {
    return undefined;
  }
  const port = url.port || ({ 'https:': '443', 'wss:': '443', 'http:': '80', 'ws:': '80' } as Record<string, string>)[url.protocol];
  return { host: port ? `${url.host.replace(/:\d+$/, '')}:${port}` : url.host, hostname: url.hostname };
}

/**
 * A failed network call in a line: "DNS lookup failed for host api.example.org (ENOTFOUND)",
 * "connection refused at 127.0.0.1:8443", "TLS error with chat.example.org:443: certificate has
 * expired (CERT_HAS_EXPIRED)", "timed out reaching 10.0.0.5:443", and so on. `address` is where
 * the call went (only its host and port are told); what the causes say of the address wins.
 * An error that is not a network one is told by its own message.
 */
export function describeNetworkError(error: unknown, address?: string | URL): string {
  const facts = chain(error);
  const target = hostOf(address);
  const first = <K extends keyof Facts>(key: K) => facts.find((fact) => fact[key] !== undefined)?.[key];
  const hostname = first('hostname') ?? target?.hostname;
  const causeAddress = first('address');
  const causePort = first('port');
  const where = causeAddress !== undefined && causePort !== undefined ? `${causeAddress.includes(':') ? `[${causeAddress}]` : causeAddress}:${causePort}`
    : target?.host ?? causeAddress ?? hostname;
  const at = (preposition: string) => (where ? ` ${preposition} ${where}` : '');
  // The innermost error that names a cause: system and undici errors carry a code; a timeout its name or its words.
  const known = facts.find((fact) => fact.code !== undefined && (DNS.has(fact.code) || CLOSED.has(fact.code) || TIMED_OUT.has(fact.code) || UNREACHABLE.has(fact.code) || fact.code === 'ECONNREFUSED' || TLS.test(fact.code)));
  const code = known?.code;
  const detail = (fact: Facts | undefined) => withoutUrls(fact?.message ?? '').trim();

  if (code && DNS.has(code)) return `DNS lookup failed for host ${hostname ?? 'unknown'} (${code}${code === 'EAI_AGAIN' ? ': a temporary failure of the resolver' : ''})`;
  if (code === 'ECONNREFUSED') return `connection refused${at('at')}`;
  if (code && TLS.test(code)) return `TLS error${at('with')}: ${detail(known)} (${code})`;
  if (code && CLOSED.has(code)) {
    // Closed while TLS was being set up: the other side does not speak TLS there (or refused this client).
    if (/TLS/.test(known?.message ?? '')) return `TLS error${at('with')}: the connection closed before TLS was established (${code})`;
    return `the connection${at('to')} was closed by the other side (${code})`;
  }
  if (code && TIMED_OUT.has(code)) return `timed out${at('reaching')} (${code})`;
  if (code && UNREACHABLE.has(code)) return `${code === 'EHOSTUNREACH' || code === 'EHOSTDOWN' ? 'no route to host' : 'network unreachable'}${where ? ` ${where}` : ''} (${code})`;
  if (facts.some((fact) => fact.name === 'TimeoutError' || /\btimed? ?out\b/i.test(fact.message ?? ''))) return `timed out${at('waiting for')}`;
  if (facts.some((fact) => fact.message === 'bad port')) return `fetch refuses to connect to ${target?.host ?? 'that port'} (a port kept for other protocols)`;
  if (facts.some((fact) => fact.name === 'AbortError')) return `the request${at('to')} was cancelled`;
  // Not a network failure named by its cause: the innermost message that says more than "fetch failed".
  const said = [...facts].reverse().find((fact) => fact.message && fact.message !== 'fetch failed');
  const text = detail(said) || detail(facts[0]) || String(error);
  return said?.code && !text.includes(said.code) ? `${text} (${said.code})` : text;
}
