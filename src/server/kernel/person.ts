/**
 * The person a conversation is with: whom an agent's run, and each tool call
 * it makes, acts for. The daemon derives it from where the run or the call
 * came from (a channel's sender, the inference API's credential and `user`,
 * an operator's connection), never from anything a model or a request body
 * says. Memory keeps each person's notes and conversations apart by it.
 *
 * - `peer:<channel>:<account>:<sender>`: someone on a channel, by the
 *   platform's stable id of the sender (never the name they show); in a room,
 *   whoever spoke the message being answered;
 * - `user:<credential>:<user>`: the `user` an inference API request names,
 *   within the credential that sent it;
 * - `credential:<credential>`: a credential that holds only some scopes (a
 *   product token, a JWT) acting for itself: over POST /tools/invoke, or on
 *   the inference API without a `user`;
 * - `operator`: the gateway's operators, who may read every session anyway:
 *   a paired device over the WebSocket (`gateway chat`, WebChat), and over
 *   HTTP a credential holding every scope (the gateway's own, the service
 *   key, a trusted proxy's user, anyone under auth mode none);
 * - `automation:<id>`: an automation's runs.
 *
 * Channel and account ids hold no colon and a credential is escaped, so each
 * key reads back one way, and no two kinds share a key.
 */
import type { Principal } from './registration.ts';

export const OPERATOR = 'operator';

export const peerPerson = (channel: string, account: string, sender: string): string => `peer:${channel}:${account}:${sender}`;

export const automationPerson = (automation: string): string => `automation:${automation}`;

const credentialOf = (principal: Principal) => encodeURIComponent(principal.credentialId ?? principal.subject);

/** An HTTP caller acting for itself: the operator when its credential holds every scope, else that credential. */
export const callerPerson = (principal: Principal): string => (principal.scopes === 'all' ? OPERATOR : `credential:${credentialOf(principal)}`);

/** An inference API request's person: its `user` within its credential; without one (or an empty one), the caller itself. */
export const apiPerson = (principal: Principal, user: string | undefined): string => (user ? `user:${credentialOf(principal)}:${user}` : callerPerson(principal));
