/**
 * Buttons on Discord: message components (an action row of buttons) under a
 * message, and a press of one (an INTERACTION_CREATE of a message component)
 * read as the gateway takes it. Discord waits three seconds for the bot's
 * answer to the interaction: a deferred update (nothing to show), or a reply
 * only the person who pressed sees.
 */
import type { APIInteraction } from 'discord-api-types/v10';
import type { ButtonPress, ChannelButton } from '../../kernel/channel.ts';

/** An action row holds five buttons; a message five rows. */
const PER_ROW = 5;

/** Buttons as action rows of components. */
export function componentsOf(buttons: readonly ChannelButton[]): unknown[] {
  const rows: unknown[] = [];
  for (let at = 0; at < Math.min(buttons.length, PER_ROW * 5); at += PER_ROW) {
    rows.push({
      type: 1,
      components: buttons.slice(at, at + PER_ROW).map((button, index) => ({ type: 2, style: at + index === 0 ? 1 : 2, label: button.label.slice(0, 80), custom_id: button.data.slice(0, 100) })),
    });
  }
  return rows;
}

/** An interaction as a press of the account's button; undefined for any other interaction. */
export function pressOf(interaction: APIInteraction, account: string): ButtonPress | undefined {
  // 3: a message component; 2: its button.
  if (!interaction || interaction.type !== 3 || (interaction.data as { component_type?: number } | undefined)?.component_type !== 2) return undefined;
  const user = interaction.member?.user ?? interaction.user;
  const data = (interaction.data as { custom_id?: unknown }).custom_id;
  if (!user || typeof user.id !== 'string' || typeof data !== 'string') return undefined;
  return {
    account, sender: user.id, senderName: user.global_name ?? user.username ?? user.id, data,
    ...(typeof interaction.channel_id === 'string' ? { chat: interaction.channel_id } : {}),
    ...(interaction.message?.id ? { messageId: interaction.message.id } : {}),
  };
}

/** The answer to an interaction: a deferred update of its message when there is nothing to show, else a reply the presser alone sees. */
export const interactionAnswer = (text: string | undefined): unknown => (text ? { type: 4, data: { content: text.slice(0, 2000), flags: 64, allowed_mentions: { parse: [] } } } : { type: 6 });
