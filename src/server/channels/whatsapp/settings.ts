/** A WhatsApp channel's settings: its accounts (business phone numbers) and the secrets each needs. */
import type { ChannelSettings } from '../../kernel/channel.ts';
import { accountsOf } from '../accounts.ts';

export interface Template { name: string; language?: string }

export interface AccountSettings {
  enabled: boolean;
  phoneNumberId?: string;
  apiRoot?: string;
  apiVersion?: string;
  /** The approved template that invites a person back once their window has shut. */
  template?: Template;
}

/** The accounts of a WhatsApp channel's settings: the top level (when it names a number, or nothing else does) and each of `accounts`. */
export function whatsappAccounts(settings: ChannelSettings): Map<string, AccountSettings> {
  return accountsOf<AccountSettings>(settings, {
    keys: ['phoneNumberId', 'apiRoot', 'apiVersion', 'template'],
    inherited: { apiRoot: true, apiVersion: true, template: true },
    hasDefault: (top, others) => top.phoneNumberId !== undefined || others.length === 0,
  });
}

export type SecretName = 'accessToken' | 'appSecret' | 'verifyToken';
export const SECRET_NAMES: readonly SecretName[] = ['accessToken', 'appSecret', 'verifyToken'];
export const SECRET_HINTS: Record<SecretName, string> = {
  accessToken: 'a system user\'s access token with whatsapp_business_messaging',
  appSecret: 'the Meta app\'s secret (App settings, Basic)',
  verifyToken: 'a string of your choosing, given to Meta with the callback URL',
};
