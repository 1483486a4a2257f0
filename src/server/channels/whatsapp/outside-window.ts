/**
 * A reply to someone whose 24-hour customer service window has shut. With a
 * template configured, it is sent (once a day at most) to invite them back,
 * and the reply waits for their answer, tried again as the outbox tries;
 * without one, the reply is given up with the reason.
 */
import type { Logger } from 'pino';
import { ChannelSendError } from '../../kernel/channel.ts';
import type { GraphApi } from './graph.ts';
import type { ServiceWindows } from './service-window.ts';

export const iso = (at: number) => new Date(at).toISOString().replace(/\.\d{3}Z$/, 'Z');

export interface OutsideWindow {
  api: GraphApi;
  phoneNumberId: string;
  customer: string;
  windows: ServiceWindows;
  template?: { name?: string; language?: string };
  /** Where the template is set, for the reason when it is not. */
  templateSetting: string;
  sendError: (error: unknown) => ChannelSendError;
  /** Keeps the windows (the invitation's time with them) as the account's cursor. */
  keep: (invitedAt: number) => Promise<void>;
  log: Pick<Logger, 'info'>;
}

export async function outsideWindow({ api, phoneNumberId, customer, windows, template, templateSetting, sendError, keep, log }: OutsideWindow): Promise<never> {
  const now = Date.now();
  const last = windows.lastHeard(customer);
  const since = last === undefined ? `${customer} has not written to this number in the last 24 hours` : `${customer} last wrote at ${iso(last)}`;
  const shut = `outside WhatsApp's 24-hour customer service window (${since})`;
  if (!template?.name) {
    throw new ChannelSendError(`${shut}: WhatsApp takes only an approved template then, and ${templateSetting} is not set; not sent`, { permanent: true });
  }
  let invited = windows.invited(customer, now);
  if (invited === undefined) {
    try {
      await api.messages(phoneNumberId, { recipient_type: 'individual', to: customer, type: 'template', template: { name: template.name, language: { code: template.language ?? 'en_US' } } });
    } catch (error) {
      const refused = sendError(error);
      throw new ChannelSendError(`${shut}, and the template ${template.name} could not be sent: ${refused.message}`, { permanent: refused.permanent, retryAfterMs: refused.retryAfterMs });
    }
    invited = Date.now();
    windows.invite(customer, invited);
    await keep(invited);
    log.info({ to: customer, template: template.name }, 'a reply waits outside the customer service window; the template was sent to invite its recipient back');
  }
  throw new ChannelSendError(`${shut}: the template ${template.name} was sent at ${iso(invited)}; the reply waits for ${customer} to answer it`);
}
