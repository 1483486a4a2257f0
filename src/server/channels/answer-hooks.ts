/**
 * Answers given in the chats to what a feature asked there (an approval
 * request, an agent's question): the presses of buttons under the channels'
 * messages, and inbound messages that are answers rather than turns (claims,
 * taken in the inbox before anything else sees them). The features that
 * asked register here; the manager hands each press over, the inbox each
 * message.
 */
import type { SessionKind } from '../../shared/channels.ts';
import type { ButtonPress, ChannelKind, InboundMessage, PressAnswer } from '../kernel/channel.ts';
import type { Tx } from '../store/database.ts';

/**
 * Looks at a message before anything else does (after a redelivery is
 * dropped), in the transaction that would record it: true when the message
 * is an answer it takes (an approver's "approve 7f3a", a person answering an
 * agent's question), which then reaches no session and no agent. `session`
 * is where the message would be recorded.
 */
export type InboundClaim = (claim: { channel: string; message: InboundMessage; session: { kind: SessionKind; peer: string; agent?: string } }, tx: Tx) => Promise<boolean> | boolean;

/** Acts on a button press of a channel: what to show the presser, or undefined when the button is not its own. */
export type PressHandler = (channel: string, press: ButtonPress) => Promise<PressAnswer | undefined>;

export class AnswerHooks {
  readonly claims: InboundClaim[] = [];
  private readonly presses: PressHandler[] = [];
  private readonly kinds: () => ReadonlyMap<string, { value: ChannelKind }>;

  constructor(kinds: () => ReadonlyMap<string, { value: ChannelKind }>) {
    this.kinds = kinds;
  }

  /** Lets a claim take the inbound messages that are answers rather than turns (see InboundClaim). */
  onClaim(claim: InboundClaim): void {
    this.claims.push(claim);
  }

  /** Acts on the presses of buttons under the channels' messages (the first handler that knows the button answers). */
  onPress(handler: PressHandler): void {
    this.presses.push(handler);
  }

  async pressed(channel: string, press: ButtonPress): Promise<PressAnswer> {
    for (const handler of this.presses) {
      const answer = await handler(channel, press);
      if (answer) return answer;
    }
    return { text: 'This button is no longer in use.' };
  }

  /** Whether a channel's messages carry buttons (and edit): its kind says so, wherever it runs. */
  hasButtons(channel: string): boolean {
    return this.kinds().get(channel)?.value.buttons ?? false;
  }
}
