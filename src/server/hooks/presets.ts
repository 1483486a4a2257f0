import { DomainError } from '../kernel/errors.ts';
import { parseJsonWithin } from '../../shared/json.ts';

/** What a hook does with a payload: a configured mapping, or one of a preset's. */
export interface HookMapping {
  name: string;
  match?: { field: string; equals?: unknown };
  action: 'job' | 'message' | 'wake';
  kind?: string;
  channel?: string;
  to?: string;
  sessionKey?: string;
  text?: string;
  /** A preset's own check and reshaping of the payload (400 when it does not fit). */
  transform?: (payload: Record<string, unknown>) => Record<string, unknown>;
}

/**
 * Mail push notifications (a Pub/Sub push: {message: {data: base64 of
 * {"emailAddress","historyId"}, messageId}, subscription}) become a
 * `gmail.push` job naming the mailbox and the history id to sync from.
 */
function gmailPush(payload: Record<string, unknown>): Record<string, unknown> {
  const message = payload.message as Record<string, unknown> | undefined;
  if (!message || typeof message !== 'object' || typeof message.data !== 'string') throw new DomainError('invalid', 'A mail push needs message.data (base64).');
  let data: Record<string, unknown>;
  try {
    data = parseJsonWithin(Buffer.from(message.data, 'base64').toString('utf8')) as Record<string, unknown>;
  } catch {
    throw new DomainError('invalid', 'message.data of a mail push must be base64 of a JSON object.');
  }
  const historyId = data?.historyId;
  if (typeof data?.emailAddress !== 'string' || (typeof historyId !== 'string' && typeof historyId !== 'number')) {
    throw new DomainError('invalid', 'A mail push names emailAddress and historyId.');
  }
  return {
    emailAddress: data.emailAddress, historyId: String(historyId),
    messageId: typeof message.messageId === 'string' ? message.messageId : null,
    subscription: typeof payload.subscription === 'string' ? payload.subscription : null,
  };
}

const PRESETS: Record<string, HookMapping[]> = {
  gmail: [{ name: 'gmail', action: 'job', kind: 'gmail.push', transform: gmailPush }],
};

/** The mappings of the enabled presets. */
export function presetMappings(names: string[]): HookMapping[] {
  return names.flatMap((name) => PRESETS[name] ?? []);
}
