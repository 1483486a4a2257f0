import { existsSync } from 'node:fs';
import { GatewayError } from '../errors.ts';
import type { SecretStore } from './backend.ts';

/** Every keychain call gives up after this long: a hung D-Bus must never hang a command. */
export const KEYCHAIN_TIMEOUT_MS = 5000;
const PROBE_ACCOUNT = '__gateway_probe__';

type Keyring = typeof import('@napi-rs/keyring');
let keyring: Promise<Keyring> | undefined;
const loadKeyring = (): Promise<Keyring> => (keyring ??= import('@napi-rs/keyring'));

/** Linux: Secret Service only, never the kernel keyring, which forgets everything on reboot. */
const ENTRY_OPTIONS = { linux: { store: 'secret-service' as const } };

export type KeychainProbe = { state: 'available' } | { state: 'unreachable'; reason: string };

/** Whether a session bus can be found at all, without touching D-Bus. */
function sessionBusReason(env = process.env): string | undefined {
  if (process.platform !== 'linux') return undefined;
  if (env.DBUS_SESSION_BUS_ADDRESS) return undefined;
  const uid = process.getuid?.();
  if (uid !== undefined && existsSync(`/run/user/${uid}/bus`)) return undefined;
  return 'no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is unset)';
}

const UNREACHABLE = /autolaunch|not provided by any \.service|ServiceUnknown|NoReply|No such file|Connection refused|Failed to connect|No storage|unavailable/i;

function refusal(service: string, error: unknown): GatewayError {
  const reason = (error as Error)?.name === 'AbortError' || (error as Error)?.name === 'TimeoutError'
    ? `no answer within ${KEYCHAIN_TIMEOUT_MS} ms`
    : (error as Error).message;
  return new GatewayError(`The OS keychain refused access to "${service}": ${reason}.`, {
    code: 'KEYCHAIN_REFUSED',
    hints: [
      'unlock the keychain (for example: gnome-keyring-daemon --unlock), then run the command again',
      'or provide the secret through its environment variable (GATEWAY_TOKEN, GATEWAY_PASSWORD, ...)',
    ],
  });
}

/** Secrets in the OS keychain through @napi-rs/keyring. */
export class KeychainSecretStore implements SecretStore {
  readonly backend = 'keychain' as const;
  readonly service: string;

  constructor(service: string) {
    this.service = service;
  }

  get location(): string {
    return `OS keychain, service "${this.service}"`;
  }

  private async call<T>(work: (k: Keyring, signal: AbortSignal) => Promise<T>): Promise<T> {
    const unreachable = sessionBusReason();
    if (unreachable) throw this.unreachable(unreachable);
    const k = await loadKeyring();
    try {
      return await work(k, AbortSignal.timeout(KEYCHAIN_TIMEOUT_MS));
    } catch (error) {
      if (UNREACHABLE.test((error as Error).message ?? '')) throw this.unreachable((error as Error).message);
      throw refusal(this.service, error);
    }
  }

  private unreachable(reason: string): GatewayError {
    return new GatewayError(`This profile keeps its secrets in the OS keychain, which is not reachable: ${reason}.`, {
      code: 'KEYCHAIN_UNREACHABLE',
      hints: [
        'run the command inside the desktop session (its DBUS_SESSION_BUS_ADDRESS), or unlock the keychain',
        `or, on a host without one (over SSH), move the profile's secrets to its 0600 file for good: gateway secrets move file --profile ${this.profile}`,
      ],
    });
  }

  /** The profile a service belongs to ("gateway:<profile>@<home id>"). */
  private get profile(): string {
    return /^gateway:([^@]+)@/.exec(this.service)?.[1] ?? '<name>';
  }

  get(name: string): Promise<string | undefined> {
    return this.call(async (k, signal) => (await new k.AsyncEntry(this.service, name, ENTRY_OPTIONS).getPassword(signal)) ?? undefined);
  }

  set(name: string, value: string): Promise<void> {
    return this.call((k, signal) => new k.AsyncEntry(this.service, name, ENTRY_OPTIONS).setPassword(value, signal));
  }

  delete(name: string): Promise<boolean> {
    return this.call((k, signal) => new k.AsyncEntry(this.service, name, ENTRY_OPTIONS).deleteCredential(signal));
  }

  list(): Promise<string[]> {
    return this.call(async (k, signal) => {
      const found = await k.findCredentialsAsync(this.service, null, signal);
      return [...new Set(found.map((credential) => credential.account))].filter((name) => name !== PROBE_ACCOUNT).sort();
    });
  }

  async clear(): Promise<void> {
    for (const name of await this.list()) await this.delete(name);
  }

  /** Asks the keychain once: available, unreachable (fall back to a file), or refusing (an error naming the fix). */
  async probe(): Promise<KeychainProbe> {
    const unreachable = sessionBusReason();
    if (unreachable) return { state: 'unreachable', reason: unreachable };
    const k = await loadKeyring();
    try {
      // A write proves more than a read: a keychain with no unlocked default collection reads "nothing" but refuses to store.
      const probe = new k.AsyncEntry(this.service, PROBE_ACCOUNT, ENTRY_OPTIONS);
      await probe.setPassword('probe', AbortSignal.timeout(KEYCHAIN_TIMEOUT_MS));
      await probe.deleteCredential(AbortSignal.timeout(KEYCHAIN_TIMEOUT_MS));
      return { state: 'available' };
    } catch (error) {
      const message = (error as Error).message ?? String(error);
      if (UNREACHABLE.test(message)) return { state: 'unreachable', reason: message };
      throw refusal(this.service, error);
    }
  }
}
