/**
 * Buttons on Slack: a message's text with an actions block of buttons
 * (Block Kit), and a press of one (a block_actions interaction, over Socket
 * Mode or posted to the app's interactivity request URL) read as the gateway
 * takes it. What the person who pressed is told goes to them alone
 * (chat.postEphemeral).
 */
import type { WebClient } from '@slack/web-api';
import type { Logger } from 'pino';
import type { ButtonPress, ChannelButton, ChannelContext, ChannelResponse } from '../../kernel/channel.ts';
import { refusal } from '../webhook.ts';

/** Slack's longest text in a section block. */
const SECTION_LIMIT = 3000;

/** The blocks of a message with buttons: its text (when it fits a section; the message's text stands in otherwise), then the buttons. */
export function blocksOf(mrkdwn: string, buttons: readonly ChannelButton[]): unknown[] {
  return [
    ...(mrkdwn.length <= SECTION_LIMIT ? [{ type: 'section', text: { type: 'mrkdwn', text: mrkdwn } }] : []),
    {
      type: 'actions',
      elements: buttons.map((button, index) => ({ type: 'button', action_id: `gw_${index}`, text: { type: 'plain_text', text: button.label.slice(0, 75) }, value: button.data })),
    },
  ];
}

/** A block_actions interaction as it reaches the app. */
export interface SlackInteraction {
  type?: string;
  user?: { id?: string; username?: string; name?: string };
  channel?: { id?: string };
  container?: { message_ts?: string; channel_id?: string };
  message?: { ts?: string };
  actions?: { action_id?: string; value?: string; type?: string }[];
}

/** The buttons pressed in an interaction (one, in practice); none for any other interaction. */
export function pressesOf(payload: SlackInteraction | undefined, account: string): ButtonPress[] {
  if (!payload || payload.type !== 'block_actions' || typeof payload.user?.id !== 'string' || !Array.isArray(payload.actions)) return [];
  const chat = payload.channel?.id ?? payload.container?.channel_id;
  const messageId = payload.container?.message_ts ?? payload.message?.ts;
  return payload.actions.filter((action) => action?.type === 'button' && typeof action.value === 'string').map((action) => ({
    account, sender: payload.user!.id!, senderName: payload.user!.username ?? payload.user!.name ?? payload.user!.id!, data: action.value!,
    ...(chat ? { chat } : {}), ...(messageId ? { messageId } : {}),
  }));
}

/** The interaction in an interactivity request's body (a form with its JSON in `payload`); undefined when the body is not one. */
export function interactionIn(body: Buffer): SlackInteraction | undefined {
  const payload = new URLSearchParams(body.toString('utf8')).get('payload');
  if (payload === null) return undefined;
  try {
    const value = JSON.parse(payload) as unknown;
    return value && typeof value === 'object' ? value as SlackInteraction : undefined;
  } catch {
    return undefined;
  }
}

/** Buttons pressed in an interaction: the gateway acts on each, and what it says goes to the person who pressed, alone. */
export async function actOn(interaction: SlackInteraction, account: string, context: Pick<ChannelContext, 'pressed'>, web: Pick<WebClient, 'chat'> | undefined, log: Logger): Promise<void> {
  for (const press of pressesOf(interaction, account)) {
    const answer = await context.pressed(press);
    if (answer.text && press.chat && web) {
      await web.chat.postEphemeral({ channel: press.chat, user: press.sender, text: answer.text }).catch((error: unknown) => log.debug({ err: error }, 'an ephemeral answer could not be posted'));
    }
  }
}

/** The answer to an interactivity request, its signature checked already: 200 once acted on, 503 (Slack sends it again) when it could not be. */
export async function answerInteractivity(body: Buffer, act: (interaction: SlackInteraction) => Promise<void>, log: Logger): Promise<ChannelResponse> {
  const interaction = interactionIn(body);
  if (!interaction) return refusal(400, 'bad_request', 'The body is not a Slack interaction (a form with its payload).');
  try {
    await act(interaction);
  } catch (error) {
    log.warn({ err: error }, 'a Slack interaction could not be handled');
    return refusal(503, 'unavailable', 'The interaction could not be handled now.');
  }
  return { status: 200, body: {} };
}
