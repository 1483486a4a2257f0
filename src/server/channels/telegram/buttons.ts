/**
 * Buttons on Telegram: an inline keyboard under a message, and a press of
 * one (a callback query) read as the gateway takes it. Telegram shows a
 * spinner on the button until the bot answers the query (answerCallbackQuery),
 * with a short text when there is one.
 */
import type { Api } from 'grammy';
import type { CallbackQuery, InlineKeyboardMarkup } from 'grammy/types';
import type { Logger } from 'pino';
import type { ButtonPress, ChannelButton, ChannelContext } from '../../kernel/channel.ts';

/** Buttons as an inline keyboard: side by side when there are few and short ones, else one a row. */
export function inlineKeyboard(buttons: readonly ChannelButton[]): InlineKeyboardMarkup {
  const keys = buttons.map((button) => ({ text: button.label, callback_data: button.data }));
  const sideBySide = keys.length <= 3 && buttons.every((button) => button.label.length <= 12);
  return { inline_keyboard: sideBySide ? [keys] : keys.map((key) => [key]) };
}

/** A callback query as a press of the account's button; undefined for one that carries no data (a game's). */
export function pressOf(query: CallbackQuery, account: string): ButtonPress | undefined {
  if (typeof query.data !== 'string' || !query.from || typeof query.from.id !== 'number') return undefined;
  const user = query.from;
  const name = user.username ? `@${user.username}` : [user.first_name, user.last_name].filter(Boolean).join(' ') || String(user.id);
  const message = query.message;
  return {
    account, sender: String(user.id), senderName: name, data: query.data,
    ...(message && typeof message.chat?.id === 'number' ? { chat: String(message.chat.id), messageId: String(message.message_id) } : {}),
  };
}

/**
 * A callback query acted on by the gateway, then answered (Telegram's
 * spinner stops, the answer's text shown as a toast). Rejects when the
 * gateway could not act on it now: the update is then delivered again.
 */
export async function answerQuery(query: CallbackQuery, account: string, context: Pick<ChannelContext, 'pressed'>, api: Pick<Api, 'answerCallbackQuery'> | undefined, log: Logger): Promise<void> {
  const press = pressOf(query, account);
  const answer = press ? await context.pressed(press) : {};
  await api?.answerCallbackQuery(query.id, answer.text ? { text: answer.text.slice(0, 200) } : {}).catch((error: unknown) => log.debug({ err: error }, 'a callback query could not be answered'));
}
