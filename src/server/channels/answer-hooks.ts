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
import type { Store, Tx } from '../store/database.ts';
import type { InboundMarks } from './inbound-marks.ts';
import type { Outbox } from './outbox/outbox.ts';

/**
 * Looks at a message before anything else does (after a redelivery is
 * dropped), in the transaction that would record it: true when the message
 * is an answer it takes (an approver's "approve 7f3a", a person answering an
 * agent's question), which then reaches no session and no agent. `session`
 * is where the message would be recorded.
 */
export type InboundClaim = (claim: { channel: string; message: InboundMessage; session: { kind: SessionKind; peer: string; agent?: string } }, tx: Tx) => Promise<boolean> | boolean;

/**
 * Acts on a button press of a channel: what to show the presser, or
 * undefined when the button is not its own. With `tx`, its work is done in
 * that transaction (a press answered by a message: the press noted, acted
 * on and answered at once, or not at all).
 */
export type PressHandler = (channel: string, press: ButtonPress, tx?: Tx) => Promise<PressAnswer | undefined>;

/** What a press answered by a message needs: the store, the inbound marks (a press delivered again), the outbox. */
export interface AnswerHooksDeps {
  kinds: () => ReadonlyMap<string, { value: ChannelKind }>;
  store: Store;
  marks: Pick<InboundMarks, 'firstSight'>;
  outbox: Pick<Outbox, 'enqueue'>;
}

const UNKNOWN_BUTTON: PressAnswer = { text: 'This button is no longer in use.' };

export class AnswerHooks {
  readonly claims: InboundClaim[] = [];
  private readonly presses: PressHandler[] = [];
  private readonly deps: AnswerHooksDeps;

  constructor(deps: AnswerHooksDeps) {
    this.deps = deps;
  }

  /** Lets a claim take the inbound messages that are answers rather than turns (see InboundClaim). */
  onClaim(claim: InboundClaim): void {
    this.claims.push(claim);
  }

  /** Acts on the presses of buttons under the channels' messages (the first handler that knows the button answers). */
  onPress(handler: PressHandler): void {
    this.presses.push(handler);
  }

  /**
   * A press acted on: what its platform shows the presser. A press whose
   * platform shows nothing (ButtonPress.answerTo) is acted on once however
   * often it is delivered (its platformId), and what the presser is to be
   * told is queued for them in the same transaction; nothing is left to show.
   */
  async pressed(channel: string, press: ButtonPress): Promise<PressAnswer> {
    const to = press.answerTo;
    if (to === undefined) return this.handle(channel, press);
    return this.deps.store.transaction(async (tx) => {
      if (press.platformId !== undefined && !(await this.deps.marks.firstSight(channel, press.account, press.platformId, tx))) return {};
      const answer = await this.handle(channel, press, tx);
      if (answer.text) {
        const key = press.platformId === undefined ? undefined : `press:${channel}:${press.account}:${press.platformId}`;
        await this.deps.outbox.enqueue({ channel, account: press.account, to, text: answer.text, ...(key ? { key } : {}) }, tx);
      }
      return {};
    });
  }

  private async handle(channel: string, press: ButtonPress, tx?: Tx): Promise<PressAnswer> {
    for (const handler of this.presses) {
      const answer = await handler(channel, press, tx);
      if (answer) return answer;
    }
    return UNKNOWN_BUTTON;
  }

  /** Whether a channel's messages carry buttons: its kind says so, wherever it runs. */
  hasButtons(channel: string): boolean {
    return this.deps.kinds().get(channel)?.value.buttons ?? false;
  }

  /** Whether a channel's message with buttons is edited once what it asked is over (else a new message says it). */
  editsButtons(channel: string): boolean {
    const kind = this.deps.kinds().get(channel)?.value;
    return (kind?.buttons ?? false) && (kind?.edits ?? true);
  }
}
