/**
 * Files out on XMPP through the server's HTTP upload service (XEP-0363,
 * https://xmpp.org/extensions/xep-0363.html): the service found through
 * service discovery (disco#info of the server, then of the items it lists,
 * for the feature urn:xmpp:http:upload:0 and its max-file-size), a slot
 * asked of it for the file's name, size and type, the bytes PUT to the slot's
 * address with the headers it names, and the message sent with the file's
 * address as its body and in an out-of-band data element (XEP-0066), which
 * clients show inline.
 *
 * A server without an upload service cannot carry files: the send fails for
 * good, saying so. Bytes go only over https, or plain http to this host (the
 * channel's own plaintext rule).
 */
import { isLoopbackAddress } from '../../../shared/config/exposure.ts';
import { ChannelSendError, type OutboundFile } from '../../kernel/channel.ts';
import { sizeOf } from '../../../shared/attachments.ts';

export const UPLOAD_NS = 'urn:xmpp:http:upload:0';
const DISCO_INFO = 'http://jabber.org/protocol/disco#info';
const DISCO_ITEMS = 'http://jabber.org/protocol/disco#items';
export const OOB_NS = 'jabber:x:oob';
/** Items of the server looked at for an upload service, at most. */
const MAX_ITEMS = 20;
/** How long a disco or slot request waits for its answer. */
const IQ_TIMEOUT_MS = 15_000;
/** How long the PUT of a file may take. */
const PUT_TIMEOUT_MS = 120_000;
/** Headers a slot may name (XEP-0363 §5); the others are dropped. */
const SLOT_HEADERS = new Set(['authorization', 'cookie', 'expires']);

type Element = import('@xmpp/client').XmppElement;
type Xml = typeof import('@xmpp/client').xml;
/** Sends an IQ and resolves with its result (rejects with the stanza error). */
export type IqRequest = (stanza: Element, timeoutMs?: number) => Promise<Element>;

/** The server's upload service: its address, and the largest file it takes when it says. */
export interface UploadService { jid: string; maxBytes?: number }

/** A slot: where the bytes go (with which headers), and where people fetch them. */
export interface Slot { put: URL; headers: Record<string, string>; get: URL }

/** What a disco#info answer says of HTTP upload: undefined when it is no upload service. */
function uploadFeature(info: Element): { maxBytes?: number } | undefined {
  const query = info.getChild('query', DISCO_INFO);
  if (!query || !query.getChildren('feature').some((feature) => feature.attrs.var === UPLOAD_NS)) return undefined;
  for (const form of query.getChildren('x', 'jabber:x:data')) {
    const fields = form.getChildren('field');
    if (fields.find((field) => field.attrs.var === 'FORM_TYPE')?.getChildText('value') !== UPLOAD_NS) continue;
    const max = Number(fields.find((field) => field.attrs.var === 'max-file-size')?.getChildText('value'));
    if (Number.isSafeInteger(max) && max > 0) return { maxBytes: max };
  }
  return {};
}

/** Finds the server's upload service (the server itself, or one of the items it lists); undefined when it offers none. */
export async function discoverUpload(request: IqRequest, xml: Xml, domain: string): Promise<UploadService | undefined> {
  const info = (jid: string) => request(xml('iq', { type: 'get', to: jid }, xml('query', { xmlns: DISCO_INFO })), IQ_TIMEOUT_MS);
  const own = uploadFeature(await info(domain));
  if (own) return { jid: domain, ...own };
  const items = (await request(xml('iq', { type: 'get', to: domain }, xml('query', { xmlns: DISCO_ITEMS })), IQ_TIMEOUT_MS)).getChild('query', DISCO_ITEMS);
  const jids = (items?.getChildren('item') ?? []).map((item) => item.attrs.jid).filter((jid): jid is string => typeof jid === 'string' && jid.length > 0 && jid !== domain);
  for (const jid of [...new Set(jids)].slice(0, MAX_ITEMS)) {
    // An item that does not answer (a component that is down) is not the service.
    const found = uploadFeature(await info(jid).catch(() => xml('iq')));
    if (found) return { jid, ...found };
  }
  return undefined;
}

/** An address the server named for the file: https, or http only to this host. */
export function uploadAddress(value: string | undefined, what: string): URL {
  let url: URL;
  try {
    url = new URL(value ?? '');
  } catch {
    throw new ChannelSendError(`XMPP: the upload service gave no valid ${what} address`, { permanent: true });
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (url.protocol === 'https:' || (url.protocol === 'http:' && (isLoopbackAddress(host) || host === 'localhost'))) return url;
  throw new ChannelSendError(`XMPP: the upload service's ${what} address is not https (${url.protocol}//${url.host}); files go only over https, or http to this host`, { permanent: true });
}

/** Asks the service for a slot for the file; a refusal that trying again cannot change is permanent. */
export async function requestSlot(request: IqRequest, xml: Xml, service: UploadService, file: OutboundFile): Promise<Slot> {
  let answer: Element;
  try {
    answer = await request(xml('iq', { type: 'get', to: service.jid },
      xml('request', { xmlns: UPLOAD_NS, filename: file.name, size: String(file.data.length), 'content-type': file.mimeType })), IQ_TIMEOUT_MS);
  } catch (error) {
    throw slotRefused(error);
  }
  const slot = answer.getChild('slot', UPLOAD_NS);
  const put = slot?.getChild('put');
  const headers: Record<string, string> = {};
  for (const header of put?.getChildren('header') ?? []) {
    const name = header.attrs.name?.toLowerCase();
    // A header is one line: a value with a line break in it is not sent.
    const value = header.text().replace(/[\r\n]+/g, ' ').trim();
    if (name && SLOT_HEADERS.has(name)) headers[name] = value;
  }
  return { put: uploadAddress(put?.attrs.url, 'upload'), headers, get: uploadAddress(slot?.getChild('get')?.attrs.url, 'download') };
}

/** What the service's refusal of a slot means for the send. */
function slotRefused(error: unknown): ChannelSendError {
  const stanza = error as { condition?: string; type?: string; text?: string; application?: Element };
  if (!stanza?.condition) return new ChannelSendError(`XMPP: the upload service did not answer: ${(error as Error)?.message ?? String(error)}`);
  const max = Number(stanza.application?.is('file-too-large', UPLOAD_NS) ? stanza.application.getChildText('max-file-size') : undefined);
  if (Number.isSafeInteger(max) && max > 0) return new ChannelSendError(`XMPP: the file is too large for the server's upload service (it takes files up to ${sizeOf(max)})`, { permanent: true });
  const said = `${stanza.condition}${stanza.text ? `: ${stanza.text.slice(0, 200)}` : ''}`;
  if (stanza.type === 'wait' || stanza.condition === 'resource-constraint') {
    const stamp = stanza.application?.is('retry', UPLOAD_NS) ? Date.parse(stanza.application.attrs.stamp ?? '') : Number.NaN;
    const wait = Number.isFinite(stamp) ? Math.min(Math.max(stamp - Date.now(), 0), 3_600_000) : undefined;
    return new ChannelSendError(`XMPP: the upload service asks to wait (${said})`, wait === undefined ? {} : { retryAfterMs: wait });
  }
  return new ChannelSendError(`XMPP: the upload service refused the file (${said})`, { permanent: true });
}

/** PUTs the file's bytes to its slot. */
export async function putFile(slot: Slot, file: OutboundFile): Promise<void> {
  let response: Response;
  try {
    response = await fetch(slot.put, {
      method: 'PUT', redirect: 'error', signal: AbortSignal.timeout(PUT_TIMEOUT_MS),
      headers: { ...slot.headers, 'content-type': file.mimeType, 'content-length': String(file.data.length) }, body: file.data,
    });
    await response.body?.cancel();
  } catch (error) {
    throw new ChannelSendError(`XMPP: the file could not be uploaded to ${slot.put.host}: ${(error as Error).cause instanceof Error ? ((error as Error).cause as Error).message : (error as Error).message}`);
  }
  if (response.ok) return;
  // Too large for the server: it stays so. Anything else (a slot gone stale, the server busy): a new slot next time.
  throw new ChannelSendError(`XMPP: the upload service answered HTTP ${response.status} to the file`, { permanent: response.status === 413 });
}

/** The message that carries an uploaded file: its address as the body (clients show it inline) and as out-of-band data. */
export function fileStanza(xml: Xml, attrs: Record<string, string>, url: URL, room: boolean): Element {
  return xml('message', attrs, xml('body', {}, url.href), xml('x', { xmlns: OOB_NS }, xml('url', {}, url.href)),
    ...(room ? [] : [xml('active', { xmlns: 'http://jabber.org/protocol/chatstates' })]));
}

/** Why the server cannot carry the file: it has no upload service, or the file is larger than that takes. */
export function uploadRefusal(service: UploadService | undefined, domain: string, file: OutboundFile): ChannelSendError | undefined {
  if (!service) return new ChannelSendError(`XMPP: the server ${domain} offers no HTTP upload service (XEP-0363), so it cannot carry files; enable one there (Prosody: mod_http_file_share; ejabberd: mod_http_upload)`, { permanent: true });
  if (service.maxBytes !== undefined && file.data.length > service.maxBytes) {
    return new ChannelSendError(`XMPP: ${file.name} (${sizeOf(file.data.length)}) is larger than the server's upload service takes (${sizeOf(service.maxBytes)})`, { permanent: true });
  }
  return undefined;
}
