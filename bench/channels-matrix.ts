/**
 * Matrix in the channels benchmark, encrypted and not: `matrix` is an account
 * with its encryption off in unencrypted direct chats, `matrix-e2e` one with
 * it on (the default) in encrypted direct chats whose people are devices of
 * their own on the same crypto library (test/support/matrix-crypto.ts).
 */
import { EncryptedPerson } from '../test/support/matrix-crypto.ts';
import type { Homeserver } from '../test/support/matrix-homeserver.ts';

/** The bots: an unencrypted one and its second account, the idle daemons' encrypted one and its second, and the encrypted one people write to. */
export interface MatrixBots {
  plain: { userId: string; token: string }; plain2: { userId: string; token: string };
  idle: { userId: string }; idle2: { userId: string }; e2e: { userId: string; token: string };
}

export function matrixBots(hs: Homeserver): MatrixBots {
  return { plain: hs.register('gwbench'), plain2: hs.register('gwbench2'), idle: hs.register('gwbenchx'), idle2: hs.register('gwbenchx2'), e2e: hs.register('gwbenche2e') };
}

/**
 * Sets up a daemon's Matrix accounts through its CLI: the unencrypted bot as the default account when `plain`, the
 * encrypted one (as `accounts.e2e` beside it, else as the default) when `encrypted`, and a second of the kind asked.
 * An idle daemon's encrypted bot is a new device each time (a new access token), as a fresh profile's would be; the
 * daemon people write to (`latency`) has the encrypted bot's one device.
 */
export function configureMatrix(options: {
  set: (key: string, value: unknown) => void; secret: (name: string, value: string) => void; hs: Homeserver; bots: MatrixBots;
  plain: boolean; encrypted: boolean; second: boolean; latency: boolean; allowFrom: string[];
}): void {
  const { set, secret, hs, bots, plain, encrypted } = options;
  const e2eToken = options.latency ? bots.e2e.token : hs.newToken(bots.idle.userId).token;
  set('channels.matrix', { enabled: true, agent: 'helper', allowFrom: options.allowFrom, homeserver: hs.url, encryption: !plain });
  secret('channels.matrix.accessToken', plain ? bots.plain.token : e2eToken);
  if (plain && encrypted) {
    set('channels.matrix.accounts.e2e', { encryption: true });
    secret('channels.matrix.accounts.e2e.accessToken', e2eToken);
  }
  if (options.second) {
    set('channels.matrix.accounts.two', { encryption: !plain });
    secret('channels.matrix.accounts.two.accessToken', plain ? bots.plain2.token : hs.newToken(bots.idle2.userId).token);
  }
}

/**
 * People whose clients encrypt, each in an encrypted direct chat with the idle daemons' bot (so that one is in rooms as
 * the unencrypted bot is) and in one with the bot they write to; their rooms with the latter.
 */
export async function encryptedPeople(hs: Homeserver, bots: MatrixBots, count: number, made: { person: EncryptedPerson; room: string }[]): Promise<void> {
  for (let index = 0; index < count; index++) {
    const person = await EncryptedPerson.make(hs, `eperson${index}`);
    made.push({ person, room: '' });
    await person.directChat(bots.idle.userId, { encrypted: true });
    made[index]!.room = await person.directChat(bots.e2e.userId, { encrypted: true });
  }
}
