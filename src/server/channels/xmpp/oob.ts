/**
 * Files people send over XMPP: a URL offered out of band (XEP-0066,
 * jabber:x:oob), as Conversations and the other clients send a voice message
 * or a file once they have put it on their server's HTTP upload (XEP-0363);
 * the message's body is then the URL itself, not words.
 *
 * The file is fetched only for those an agent answers (as every channel's
 * files are), up to the channel's size bound, with no redirect followed:
 * over https from a public address; from a private one only on the account's
 * own domain (a server on a home network); and, when the account's own
 * server is on this host, from loopback over http too. The addresses are
 * judged when the connection is made, so what was judged is what is reached.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import { isIP } from 'node:net';
import type { XmppElement } from '@xmpp/client';
import ipaddr from 'ipaddr.js';
import { isLoopbackAddress } from '../../../shared/config/exposure.ts';
import type { InboundAttachment } from '../../kernel/channel.ts';
import { readIncoming } from '../attachments.ts';

const OOB = 'jabber:x:oob';
/** URLs taken from one message at most. */
const MAX_URLS = 4;

/** Where the account is: its JID and, when it is given, the address of its server. */
export interface OobAccount { jid?: string; service?: string }

/** Whom a fetch may reach: the account's domain, and whether its server is on this host. */
interface Sources { domain: string; serverIsLocal: boolean }

/** The URLs a message offers out of band (each x of jabber:x:oob's url). */
function offeredUrls(stanza: XmppElement): URL[] {
  const urls: URL[] = [];
  for (const child of stanza.children) {
    if (typeof child === 'string' || child.name !== 'x' || child.attrs.xmlns !== OOB) continue;
    const text = child.getChildText('url')?.trim();
    if (!text) continue;
    try {
      const url = new URL(text);
      if ((url.protocol === 'https:' || url.protocol === 'http:') && !urls.some((known) => known.href === url.href)) urls.push(url);
    } catch {
      // Not a URL: nothing to fetch.
    }
  }
  return urls.slice(0, MAX_URLS);
}

/**
 * What a message brings: its words (none when the body is only the URL it
 * offers, as the clients send a file) and the files it offers.
 */
export function outOfBand(stanza: XmppElement, body: string, account: OobAccount | undefined): { text: string; attachments: InboundAttachment[] } {
  const urls = offeredUrls(stanza);
  if (urls.length === 0 || !account?.jid) return { text: body, attachments: [] };
  const domain = account.jid.split('@')[1]!.split('/')[0]!.toLowerCase();
  let serverHost = domain;
  try {
    serverHost = new URL(account.service ?? `xmpp://${domain}`).hostname.replace(/^\[|\]$/g, '');
  } catch {
    // The connection refuses such a service already.
  }
  const sources: Sources = { domain, serverIsLocal: isLoopbackAddress(serverHost) || serverHost === 'localhost' };
  const text = urls.some((url) => url.href === body.trim() || url.toString() === body.trim()) ? '' : body;
  return { text, attachments: urls.map((url) => attachmentOf(url, sources)) };
}

function attachmentOf(url: URL, sources: Sources): InboundAttachment {
  let name = url.pathname.split('/').filter(Boolean).pop() ?? '';
  try {
    name = decodeURIComponent(name);
  } catch {
    // Left as it came.
  }
  return { name: name || 'file', fetch: (maxBytes, signal) => download(url, sources, maxBytes, signal) };
}

/** Why an address may not be reached for this host; undefined when it may. */
function addressProblem(address: string, host: string, sources: Sources): string | undefined {
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  const range = parsed.range();
  if (range === 'unicast') return undefined;
  if (range === 'loopback') return sources.serverIsLocal ? undefined : `${host} is on this host (${address}), and the account's server is not`;
  const ownDomain = host === sources.domain || host.endsWith(`.${sources.domain}`);
  if ((range === 'private' || range === 'uniqueLocal') && ownDomain) return undefined;
  return `${host} is at a ${range} address (${address}); files are fetched from public addresses, or private ones of the account's own domain`;
}

/** Resolves a host as a connection does, refusing it when any of its addresses may not be reached. */
function checkedLookup(sources: Sources) {
  return (hostname: string, options: { all?: boolean }, callback: (error: Error | null, address: string | LookupAddress[], family?: number) => void) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (error, addresses) => {
      if (error) return callback(error, '');
      if (addresses.length === 0) return callback(new Error(`${hostname} has no address`), '');
      for (const { address } of addresses) {
        const problem = addressProblem(address, hostname.toLowerCase(), sources);
        if (problem) return callback(new Error(problem), '');
      }
      if (options.all) return callback(null, addresses);
      return callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/** The file's bytes, up to maxBytes; one redirect or answer other than 200 is refused with why. */
async function download(url: URL, sources: Sources, maxBytes: number, signal: AbortSignal): Promise<Uint8Array> {
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const local = isLoopbackAddress(host) || host === 'localhost';
  if (url.protocol === 'http:' && !(local && sources.serverIsLocal)) throw new Error(`${url.origin} is not https (files come only over https, but from a server on this host)`);
  if (isIP(host)) {
    const problem = addressProblem(host, host, sources);
    if (problem) throw new Error(problem);
  } else if (host === 'localhost' && !sources.serverIsLocal) throw new Error('localhost is this host, and the account\'s server is not');
  // TLS is loaded when a connection needs it.
  const client = url.protocol === 'https:' ? await import('node:https') : http;
  return new Promise<Uint8Array>((resolve, reject) => {
    const request = client.get(url, { signal, lookup: checkedLookup(sources) as never, headers: { accept: '*/*' } }, (response) => {
      const status = response.statusCode ?? 0;
      if (status !== 200) {
        response.resume();
        reject(new Error(status >= 300 && status < 400 ? `${url.origin} sent it elsewhere (${status}); redirects are not followed` : `${url.origin} answered ${status}`));
        return;
      }
      readIncoming(response, maxBytes, `${url.origin} closed the connection before the file ended`).then(resolve, reject);
    });
    request.on('error', reject);
  });
}
