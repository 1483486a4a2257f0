/**
 * What Meta's webhook posts for WhatsApp (object whatsapp_business_account):
 * entries of changes, each for one business phone number, holding the
 * messages people sent it (with their profile names in `contacts`) and the
 * statuses of the messages it sent (sent, delivered, read, failed). Read
 * here into plain values; anything malformed inside is skipped, never
 * thrown.
 */
import type { InboundMessage } from '../../kernel/channel.ts';
import { TooLarge } from '../attachments.ts';
import type { GraphApi } from './graph.ts';
import type { WaPress } from './interactive.ts';

/** Longest text taken from one message (WhatsApp's own limit is 4,096 characters). */
const MAX_INBOUND_CHARS = 16_384;

/** A file a person sent: Meta's media id, fetched later through the Graph API with the access token. */
export interface WaMedia {
  id: string;
  name: string;
  mimeType?: string;
  /** A voice note recorded in the app (audio with its voice mark). */
  voice?: boolean;
}

/** A message a person sent the number. */
export interface WaMessage {
  /** Meta's id of the message (wamid....). */
  id: string;
  /** The person's WhatsApp id: their number in international form, digits only. */
  from: string;
  /** Their profile name, when Meta gave it. */
  name?: string;
  /** When they sent it (ms). */
  at: number;
  type: string;
  /** What the agent reads: the text, a caption, a button's label, a location or contact spelled out; empty for media alone. */
  text: string;
  media: WaMedia[];
  /** Whether it is a person writing, which opens the 24-hour window (a reaction, a system notice is not). */
  speaks: boolean;
  /** A button or list row of the business's interactive message pressed: an answer to what it asked, never a turn. */
  press?: WaPress;
}

/** What became of a message the number sent. */
export interface WaStatus {
  id: string;
  status: string;
  recipient: string;
  at: number;
  errors: { code?: number; title: string; details?: string }[];
}

/** One change: what happened on one business phone number. */
export interface WaChange {
  phoneNumberId?: string;
  messages: WaMessage[];
  statuses: WaStatus[];
  /** Problems Meta reports about the notification itself (value.errors). */
  errors: { code?: number; title: string }[];
}

const isObject = (value: unknown): value is Record<string, any> => typeof value === 'object' && value !== null && !Array.isArray(value);
const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
const str = (value: unknown): string | undefined => (typeof value === 'string' && value.length > 0 ? value : undefined);
const clip = (text: string) => (text.length > MAX_INBOUND_CHARS ? text.slice(0, MAX_INBOUND_CHARS) : text);
/** Meta's timestamps are seconds, as strings; one that is missing, or later than now, is now. */
const timeOf = (value: unknown, now: number): number => {
  const seconds = Number(value);
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds * 1000, now) : now;
};

const EXTENSIONS: Record<string, string> = {
  'image/jpeg': 'jpg', 'image/png': 'png', 'image/webp': 'webp', 'audio/ogg': 'ogg', 'audio/mpeg': 'mp3', 'audio/mp4': 'm4a', 'audio/aac': 'aac', 'audio/amr': 'amr',
  'video/mp4': 'mp4', 'video/3gpp': '3gp', 'application/pdf': 'pdf', 'text/plain': 'txt',
};

/** A media message's file, named as WhatsApp shows it (a document keeps its own name). */
function mediaOf(type: string, body: Record<string, any>): WaMedia | undefined {
  const id = str(body.id);
  if (!id) return undefined;
  const mimeType = str(body.mime_type);
  const extension = EXTENSIONS[mimeType?.split(';')[0]!.trim().toLowerCase() ?? ''];
  const base = type === 'audio' && body.voice === true ? 'voice' : type;
  const name = type === 'document' && str(body.filename) ? body.filename as string : `${base}${extension ? `.${extension}` : ''}`;
  return { id, name, ...(mimeType ? { mimeType } : {}), ...(base === 'voice' ? { voice: true } : {}) };
}

/** A shared location or contact card, as a line the agent can read. */
function described(type: string, body: Record<string, any>): string | undefined {
  if (type === 'location') {
    const where = [str(body.name), str(body.address)].filter(Boolean).join(', ');
    const at = typeof body.latitude === 'number' && typeof body.longitude === 'number' ? `${body.latitude}, ${body.longitude}` : undefined;
    return `[location: ${[where, at && `(${at})`].filter(Boolean).join(' ') || 'unnamed'}]`;
  }
  if (type === 'contacts') {
    const cards = list(body).filter(isObject).map((card) => {
      const name = str(card.name?.formatted_name) ?? [str(card.name?.first_name), str(card.name?.last_name)].filter(Boolean).join(' ');
      const phones = list(card.phones).filter(isObject).map((phone) => str(phone.phone)).filter(Boolean);
      return [name, ...phones].filter(Boolean).join(', ');
    }).filter(Boolean);
    return cards.length ? `[contact: ${cards.join('; ')}]` : undefined;
  }
  return undefined;
}

function messageOf(raw: unknown, names: Map<string, string>, now: number): WaMessage | undefined {
  if (!isObject(raw)) return undefined;
  const id = str(raw.id);
  const from = str(raw.from);
  const type = str(raw.type) ?? 'unknown';
  if (!id || !from || !/^\d{1,20}$/.test(from)) return undefined;
  const base = { id, from, at: timeOf(raw.timestamp, now), type, ...(names.has(from) ? { name: names.get(from)! } : {}) };
  const body = isObject(raw[type]) ? raw[type] as Record<string, any> : {};
  const media: WaMedia[] = [];
  let text = '';
  switch (type) {
    case 'text':
      text = typeof body.body === 'string' ? body.body : '';
      break;
    case 'image': case 'video': case 'audio': case 'document': case 'sticker': {
      const file = mediaOf(type, body);
      if (file) media.push(file);
      text = typeof body.caption === 'string' ? body.caption : '';
      break;
    }
    case 'button':
      // A template's quick reply: what the person tapped.
      text = str(body.text) ?? str(body.payload) ?? '';
      break;
    case 'interactive': {
      const reply = isObject(body.button_reply) ? body.button_reply : isObject(body.list_reply) ? body.list_reply : {};
      text = [str(reply.title), str(reply.description)].filter(Boolean).join(': ');
      const pressed = str(reply.id);
      if (pressed) {
        const under = isObject(raw.context) ? str(raw.context.id) : undefined;
        return { ...base, text: clip(text), media, speaks: true, press: { id: pressed.slice(0, 256), title: (str(reply.title) ?? '').slice(0, 200), ...(under ? { messageId: under } : {}) } };
      }
      break;
    }
    case 'location':
      text = described(type, body) ?? '';
      break;
    case 'contacts':
      text = described(type, raw.contacts) ?? '';
      break;
    default:
      // A reaction, an order, a system notice, a type Meta does not support yet: nothing an agent answers.
      return { ...base, text: '', media, speaks: type !== 'reaction' && type !== 'system' };
  }
  return { ...base, text: clip(text), media, speaks: true };
}

function statusOf(raw: unknown, now: number): WaStatus | undefined {
  if (!isObject(raw)) return undefined;
  const id = str(raw.id);
  const status = str(raw.status);
  if (!id || !status) return undefined;
  const errors = list(raw.errors).filter(isObject).map((error) => ({
    ...(typeof error.code === 'number' ? { code: error.code } : {}),
    title: (str(error.title) ?? str(error.message) ?? 'no reason given').slice(0, 300),
    ...(str(error.error_data?.details) ? { details: String(error.error_data.details).slice(0, 300) } : {}),
  }));
  return { id, status, recipient: str(raw.recipient_id) ?? '', at: timeOf(raw.timestamp, now), errors };
}

/**
 * The changes of a notification; undefined for a body that is not one
 * (no `entry` list). Changes of fields other than `messages` (template
 * reviews, quality ratings) are left out.
 */
export function changesOf(payload: unknown, now = Date.now()): WaChange[] | undefined {
  if (!isObject(payload) || !Array.isArray(payload.entry)) return undefined;
  const changes: WaChange[] = [];
  for (const entry of payload.entry) {
    if (!isObject(entry)) continue;
    for (const change of list(entry.changes)) {
      if (!isObject(change) || change.field !== 'messages' || !isObject(change.value)) continue;
      const value = change.value;
      const names = new Map<string, string>();
      for (const contact of list(value.contacts)) {
        if (isObject(contact) && str(contact.wa_id) && str(contact.profile?.name)) names.set(contact.wa_id, String(contact.profile.name).slice(0, 200));
      }
      changes.push({
        ...(str(value.metadata?.phone_number_id) ? { phoneNumberId: value.metadata.phone_number_id as string } : {}),
        messages: list(value.messages).map((raw) => messageOf(raw, names, now)).filter((message): message is WaMessage => message !== undefined),
        statuses: list(value.statuses).map((raw) => statusOf(raw, now)).filter((status): status is WaStatus => status !== undefined),
        errors: list(value.errors).filter(isObject).map((error) => ({ ...(typeof error.code === 'number' ? { code: error.code } : {}), title: (str(error.title) ?? str(error.message) ?? 'no reason given').slice(0, 300) })),
      });
    }
  }
  return changes;
}

/** A person's message as the gateway takes it (undefined when there is nothing to answer); its files fetched through the account's API when read. */
export function inboundOf(account: string, message: WaMessage, api: () => GraphApi | undefined): InboundMessage | undefined {
  if (!message.text.trim() && message.media.length === 0) return undefined;
  return {
    account, kind: 'direct', sender: message.from, senderName: message.name ?? `+${message.from}`, replyTo: message.from,
    text: message.text, at: message.at, platformId: message.id, reference: message.id,
    ...(message.media.length ? {
      attachments: message.media.map((media) => ({
        name: media.name, mimeType: media.mimeType, ...(media.voice ? { voice: true } : {}),
        // The address Meta gives lasts minutes: asked for when the file is fetched.
        fetch: async (maxBytes: number, signal: AbortSignal) => {
          const graph = api();
          if (!graph) throw new Error('the account has no access token yet');
          const info = await graph.mediaInfo(media.id, signal);
          if (typeof info.file_size === 'number' && info.file_size > maxBytes) throw new TooLarge(maxBytes);
          if (typeof info.url !== 'string') throw new Error('Meta gave no address for it');
          return graph.download(info.url, maxBytes, signal);
        },
      })),
    } : {}),
  };
}
