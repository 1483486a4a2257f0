/**
 * Buttons on WhatsApp: interactive messages of the Cloud API. Up to three
 * buttons go as reply buttons under the message's body; more (an agent's
 * question with up to ten answers) as a list, opened by a button, of one
 * section of rows. Meta's bounds are kept: a reply buttons message's body at
 * most 1,024 characters (a list's 4,096), button titles 20 and unique, row
 * titles 24 (a row's description, 72, carries the rest of a long answer),
 * button ids 256 and row ids 200. A text too long for the body goes first as
 * a text message of its own. A press comes back as a message of type
 * interactive (button_reply, list_reply) carrying the button's id: the
 * gateway's button data.
 */
import type { ButtonPress, ChannelButton } from '../../kernel/channel.ts';
import { markdownToWhatsApp } from './format.ts';

export const INTERACTIVE_LIMITS = {
  buttons: 3, buttonTitle: 20, buttonId: 256, buttonBody: 1024,
  rows: 10, rowTitle: 24, rowDescription: 72, rowId: 200, listBody: 4096, listButton: 20, sectionTitle: 24,
} as const;

/** What opens the list, and its one section's title. */
const LIST_BUTTON = 'Choose';
const SECTION_TITLE = 'Answers';
/** The body of the buttons' message when the text went before it on its own. */
const SHORT_BODY = 'Your answer:';

const clip = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 1).trimEnd()}…`);

/** Titles within a bound, each unlike the others (WhatsApp refuses a message whose buttons share a title). */
function titles(labels: readonly string[], max: number): string[] {
  const taken = new Set<string>();
  return labels.map((label, index) => {
    const plain = label.replace(/\s+/g, ' ').trim() || String(index + 1);
    let title = clip(plain, max);
    if (taken.has(title)) title = `${clip(plain, max - String(index + 1).length - 1)} ${index + 1}`;
    taken.add(title);
    return title;
  });
}

/** The interactive part of a message with buttons (its body given). */
function interactiveOf(body: string, buttons: readonly ChannelButton[]): Record<string, unknown> {
  const limits = INTERACTIVE_LIMITS;
  if (buttons.length <= limits.buttons) {
    const names = titles(buttons.map((button) => button.label), limits.buttonTitle);
    return {
      type: 'button', body: { text: body },
      action: { buttons: buttons.map((button, index) => ({ type: 'reply', reply: { id: button.data.slice(0, limits.buttonId), title: names[index]! } })) },
    };
  }
  const shown = buttons.slice(0, limits.rows);
  const names = titles(shown.map((button) => button.label), limits.rowTitle);
  return {
    type: 'list', body: { text: body },
    action: {
      button: LIST_BUTTON,
      sections: [{
        title: SECTION_TITLE,
        rows: shown.map((button, index) => {
          const whole = button.label.replace(/\s+/g, ' ').trim();
          // A title cut short: the answer whole (as far as it fits) beneath it.
          const description = whole.length > limits.rowTitle ? { description: clip(whole, limits.rowDescription) } : {};
          return { id: button.data.slice(0, limits.rowId), title: names[index]!, ...description };
        }),
      }],
    },
  };
}

/**
 * The messages endpoint's bodies for a text with buttons: one interactive
 * message when the text fits its body, else the text on its own, then the
 * buttons under a short line. `context` quotes a message of the person's.
 */
export function interactiveBodies(text: string, buttons: readonly ChannelButton[], context?: string): Record<string, unknown>[] {
  const quoted = context ? { context: { message_id: context } } : {};
  const body = markdownToWhatsApp(text).trim();
  const limit = buttons.length <= INTERACTIVE_LIMITS.buttons ? INTERACTIVE_LIMITS.buttonBody : INTERACTIVE_LIMITS.listBody;
  if (body && body.length <= limit) return [{ type: 'interactive', interactive: interactiveOf(body, buttons), ...quoted }];
  return [
    ...(body ? [{ type: 'text', text: { body: clip(body, 4096), preview_url: false }, ...quoted }] : []),
    { type: 'interactive', interactive: interactiveOf(SHORT_BODY, buttons) },
  ];
}

/** A reply to an interactive message, as notifications.ts reads it. */
export interface WaPress {
  /** The button's or row's id: the gateway's button data. */
  id: string;
  title: string;
  /** The message the button was under (its wamid), when Meta says. */
  messageId?: string;
}

/** A person's press as the gateway takes it: what they are to be told goes back to them as a message (WhatsApp shows no toast). */
export function buttonPress(account: string, message: { id: string; from: string; name?: string; press: WaPress }): ButtonPress {
  return {
    account, sender: message.from, senderName: message.name ?? `+${message.from}`, data: message.press.id, chat: message.from,
    ...(message.press.messageId ? { messageId: message.press.messageId } : {}), platformId: message.id, answerTo: message.from,
  };
}
