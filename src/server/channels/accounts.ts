/**
 * The accounts a chat channel's settings describe: the top level of
 * `channels.<id>` is the default account (when it names one), and each entry
 * of `channels.<id>.accounts` is another, which takes some settings from the
 * top level when it leaves them out.
 */
import type { ChannelSettings } from '../kernel/channel.ts';

/** The account the top-level `channels.<id>` settings describe. */
export const DEFAULT_ACCOUNT = 'default';

/** How a channel's accounts are read from its settings. */
export interface AccountShape<S extends { enabled: boolean }> {
  /** The settings an account has: the default account's from the top level, another's from its entry. */
  keys: readonly Exclude<keyof S, 'enabled'>[];
  /** Those another account takes from the top level when its entry leaves them out: always, or when the test on both says so. */
  inherited?: { readonly [K in keyof S]?: true | ((account: Partial<S>, top: Partial<S>) => boolean) };
  /** What a setting is when no one gives it. */
  defaults?: Partial<S>;
  /** Whether the top level describes an account of its own (`others`: the names under `accounts`); by default it always does. */
  hasDefault?: (top: Partial<S>, others: string[]) => boolean;
}

/** The accounts of a channel's settings, by name: the default account first, then the others in their order. */
export function accountsOf<S extends { enabled: boolean }>(settings: ChannelSettings, shape: AccountShape<S>): Map<string, S> {
  const top = settings as unknown as Partial<S> & { accounts?: Record<string, Partial<S>> };
  const others = top.accounts ?? {};
  const read = (given: Partial<S>, inherit: boolean): S => {
    // Every key is set, to undefined when no one gives it, as the platforms read them.
    const account = { enabled: inherit ? given.enabled ?? true : true } as Record<keyof S, unknown>;
    for (const key of shape.keys) {
      const rule = inherit ? shape.inherited?.[key] : undefined;
      const fromTop = rule === true || (typeof rule === 'function' && rule(given, top));
      account[key] = given[key] ?? (fromTop ? top[key] : undefined) ?? shape.defaults?.[key];
    }
    return account as S;
  };
  const accounts = new Map<string, S>();
  if (shape.hasDefault?.(top, Object.keys(others)) ?? true) accounts.set(DEFAULT_ACCOUNT, read(top, false));
  for (const [name, account] of Object.entries(others)) accounts.set(name, read(account, true));
  return accounts;
}

/** Where one of an account's settings or secrets is: `channels.<id>.<key>` for the default account, `channels.<id>.accounts.<name>.<key>` for another. */
export function settingPath(channelId: string, account: string, key: string): string {
  return account === DEFAULT_ACCOUNT ? `channels.${channelId}.${key}` : `channels.${channelId}.accounts.${account}.${key}`;
}
