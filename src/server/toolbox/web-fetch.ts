/**
 * web.fetch: an http(s) GET of a public page, its HTML turned into Markdown
 * (turndown), bounded in size (also once decompressed), time and redirects.
 * The connection is made to the address the guard passed (address-guard.ts),
 * through the request's own lookup, so a name cannot resolve one way when
 * checked and another when connected.
 *
 * What it answers: a server that answered, whatever its status (a 404, a
 * 500), is the result, its status in it; an address or a request web.fetch
 * does not take is the caller's (400); a server that could not be reached,
 * did not answer in time, sent what cannot be read or a redirect that cannot
 * be followed failed the call (502, upstream).
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { Readable } from 'node:stream';
import { DomainError } from '../kernel/errors.ts';
import { AddressRefused, checkedAddresses, type Resolver } from './address-guard.ts';

export interface FetchLimits {
  maxBytes: number;
  timeoutMs: number;
  maxRedirects: number;
  allowPrivate: readonly string[];
  userAgent: string;
}

export interface Fetched {
  url: string;
  status: number;
  contentType: string;
  title: string | null;
  /** The page as Markdown (HTML) or as it came (text, JSON). */
  content: string;
  bytes: number;
  truncated: boolean;
  redirects: string[];
}

const TEXTUAL = /^(text\/|application\/(json|xml|xhtml\+xml|javascript|ld\+json|rss\+xml|atom\+xml)|[^;]*\+json|[^;]*\+xml)/i;

/** One GET, the address checked as the socket connects; resolves with the response, not yet read. */
async function get(url: URL, limits: FetchLimits, resolve: Resolver, signal: AbortSignal): Promise<IncomingMessage> {
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  // An address written as such is connected to without a lookup: it is checked here.
  const bare = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(bare)) await checkedAddresses(bare, port, limits.allowPrivate, resolve);
  const lookup = (host: string, options: { all?: boolean }, callback: (error: Error | null, address: string | LookupAddress[], family?: number) => void) => {
    checkedAddresses(host, port, limits.allowPrivate, resolve).then(
      (addresses) => (options.all ? callback(null, addresses) : callback(null, addresses[0]!.address, addresses[0]!.family)),
      (error: unknown) => callback(error as Error, ''),
    );
  };
  // TLS loads with the first https address.
  const send = url.protocol === 'https:' ? (await import('node:https')).request : httpRequest;
  return new Promise((resolvePromise, reject) => {
    const req = send(url, {
      method: 'GET', agent: false, lookup: lookup as never, signal,
      headers: { 'user-agent': limits.userAgent, accept: 'text/html,application/xhtml+xml,text/plain,application/json;q=0.9,*/*;q=0.5', 'accept-encoding': 'gzip, deflate, br' },
    }, resolvePromise);
    req.on('error', reject);
    req.end();
  });
}

/** The body, decompressed, up to maxBytes (of what it decompresses to). */
async function readBody(response: IncomingMessage, maxBytes: number): Promise<{ body: Buffer; truncated: boolean }> {
  const encoding = String(response.headers['content-encoding'] ?? '').toLowerCase();
  let stream: Readable = response;
  if (encoding === 'gzip' || encoding === 'x-gzip') stream = response.pipe(createGunzip());
  else if (encoding === 'deflate') stream = response.pipe(createInflate());
  else if (encoding === 'br') stream = response.pipe(createBrotliDecompress());
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  try {
    for await (const chunk of stream) {
      const piece = chunk as Buffer;
      if (size + piece.length > maxBytes) {
        chunks.push(piece.subarray(0, maxBytes - size));
        size = maxBytes;
        truncated = true;
        break;
      }
      chunks.push(piece);
      size += piece.length;
    }
  } finally {
    response.destroy();
    stream.destroy();
  }
  return { body: Buffer.concat(chunks, size), truncated };
}

let converter: Promise<(html: string, base: string) => { title: string | null; markdown: string }> | undefined;
/** HTML to Markdown, loaded at the first page fetched. */
function markdownOf(): Promise<(html: string, base: string) => { title: string | null; markdown: string }> {
  converter ??= import('turndown').then(({ default: TurndownService }) => (html: string, base: string) => {
    const service = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-' });
    service.remove(['script', 'style', 'noscript', 'iframe', 'svg', 'canvas', 'template', 'head', 'nav', 'footer', 'form', 'button', 'select', 'input', 'object', 'embed']);
    // Links and images point somewhere a reader can follow: resolved against the page's address.
    const absolute = (href: string | null) => {
      try {
        return href ? new URL(href, base).toString() : '';
      } catch {
        return href ?? '';
      }
    };
    service.addRule('absoluteLinks', {
      filter: (node) => node.nodeName === 'A' && Boolean(node.getAttribute('href')),
      replacement: (content, node) => {
        const href = absolute((node as unknown as { getAttribute(name: string): string | null }).getAttribute('href'));
        return /^(javascript|data|vbscript):/i.test(href) || !content.trim() ? content : `[${content}](${href})`;
      },
    });
    service.addRule('absoluteImages', {
      filter: 'img',
      replacement: (_content, node) => {
        const src = absolute((node as unknown as { getAttribute(name: string): string | null }).getAttribute('src'));
        const alt = (node as unknown as { getAttribute(name: string): string | null }).getAttribute('alt') ?? '';
        return src && !/^(javascript|data):/i.test(src) ? `![${alt}](${src})` : alt;
      },
    });
    const title = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1]?.replace(/\s+/g, ' ').trim() ?? null;
    // The head is metadata (its title is given apart), never text of the page.
    const body = html.replace(/<head[\s>][\s\S]*?<\/head>/i, '');
    const markdown = service.turndown(body).replace(/^(\s*[-*]|\s*\d+\.)\s{2,}/gm, '$1 ').replace(/\n{3,}/g, '\n\n').trim();
    return { title: title ? decodeEntities(title) : null, markdown };
  });
  return converter;
}

const decodeEntities = (text: string) => text.replace(/&(amp|lt|gt|quot|#39|#x27);/g, (entity) => ({ '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#39;': '\'', '&#x27;': '\'' })[entity] ?? entity);

const refused = (message: string) => new DomainError('invalid', message, { code: 'fetch_refused' });

/** The server asked failed the call: the request was one web.fetch takes, what came back (or did not) is not a page. */
const failed = (message: string, code: string) => new DomainError('upstream', message, { code });

/** Why a tool does not take a parsed address (its scheme, credentials in it), or undefined. */
function unfetchable(url: URL, tool = 'web.fetch'): string | undefined {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `${tool} takes http and https addresses, not ${url.protocol.replace(/:$/, '')}`;
  if (url.username || url.password) return `${tool} takes no credentials in the address`;
  return undefined;
}

/** Checks an address before anything is sent: a scheme and a form web.fetch (or the tool named) takes. */
export function fetchableUrl(raw: string, tool = 'web.fetch'): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refused(`${JSON.stringify(raw.slice(0, 200))} is not an address.`);
  }
  const problem = unfetchable(url, tool);
  if (problem) throw refused(`${problem}.`);
  return url;
}

/** Where a redirect leads, or the failure it is: the server's answer, not the caller's request. */
function redirectTarget(location: string, from: URL): URL {
  let next: URL;
  try {
    next = new URL(location, from);
  } catch {
    throw failed(`${from.host} redirected to ${JSON.stringify(location.slice(0, 200))}, which is not an address.`, 'fetch_bad_redirect');
  }
  const problem = unfetchable(next);
  if (problem) throw failed(`${from.host} redirected to an address web.fetch does not follow (${problem}).`, 'fetch_bad_redirect');
  return next;
}

/** Fetches a page, following redirects (each one checked like the first). */
export async function fetchPage(raw: string, limits: FetchLimits, resolve: Resolver): Promise<Fetched> {
  let url = fetchableUrl(raw);
  const redirects: string[] = [];
  const signal = AbortSignal.timeout(limits.timeoutMs);
  for (;;) {
    let response: IncomingMessage;
    try {
      response = await get(url, limits, resolve, signal);
    } catch (error) {
      if (error instanceof AddressRefused) throw refused(error.message);
      if (signal.aborted) throw failed(`${url.host} did not answer within ${limits.timeoutMs} ms.`, 'fetch_timeout');
      const code = (error as NodeJS.ErrnoException).code;
      throw failed(`${url.host} could not be reached${code ? ` (${code})` : ''}.`, 'fetch_failed');
    }
    const status = response.statusCode ?? 0;
    if (status >= 300 && status < 400 && response.headers.location) {
      response.destroy();
      if (redirects.length >= limits.maxRedirects) throw failed(`${url.host} redirected more than ${limits.maxRedirects} times (from ${raw}).`, 'fetch_redirects');
      const next = redirectTarget(response.headers.location, url);
      redirects.push(next.toString());
      url = next;
      continue;
    }
    const contentType = String(response.headers['content-type'] ?? 'application/octet-stream');
    if (!TEXTUAL.test(contentType)) {
      response.destroy();
      // A page that answered with an error and no text (a bare 404) is still an answer: its status is the result.
      if (status < 200 || status >= 300) return { url: url.toString(), status, contentType, title: null, content: '', bytes: 0, truncated: false, redirects };
      throw refused(`${url} is ${contentType.split(';')[0]}, not a page or text; web.fetch reads text only.`);
    }
    let read: { body: Buffer; truncated: boolean };
    try {
      read = await readBody(response, limits.maxBytes);
    } catch (error) {
      if (signal.aborted) throw failed(`${url.host} did not finish within ${limits.timeoutMs} ms.`, 'fetch_timeout');
      throw failed(`${url.host} sent a body that could not be read (${(error as Error).message}).`, 'fetch_failed');
    }
    const charset = /charset=["']?([\w-]+)/i.exec(contentType)?.[1]?.toLowerCase();
    let text: string;
    try {
      text = new TextDecoder(charset ?? 'utf-8', { fatal: false }).decode(read.body);
    } catch {
      text = new TextDecoder('utf-8', { fatal: false }).decode(read.body);
    }
    const html = /html/i.test(contentType);
    const page = html ? (await markdownOf())(text, url.toString()) : { title: null, markdown: text };
    return { url: url.toString(), status, contentType, title: page.title, content: page.markdown, bytes: read.body.length, truncated: read.truncated, redirects };
  }
}
