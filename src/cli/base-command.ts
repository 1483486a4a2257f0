import { Command, Flags } from '@oclif/core';
import { asGatewayError, errorJson, errorText, GatewayError } from '../shared/errors.ts';
import { ExitCode } from '../shared/exit-codes.ts';
import { gatewayHome, profilePaths, type ProfilePaths } from '../shared/profile.ts';
import { requireProfile, selectProfileName } from '../shared/profiles.ts';
import type { RpcClient } from './rpc-client.ts';

export interface ProfileRef {
  name: string;
  /** Where the name came from: --profile, GATEWAY_PROFILE, `profiles use` or default. */
  source: string;
  paths: ProfilePaths;
}


/**
 * Every command extends this: it owns --profile and --json, the exit codes,
 * error output with next steps, and the RPC client. A command's run() returns
 * its result, and that result is its --json output.
 */
export abstract class BaseCommand<T> extends Command {
  static override enableJsonFlag = true;
  static override baseFlags = {
    profile: Flags.string({
      char: 'p',
      description: 'profile to act on (else GATEWAY_PROFILE, else the one chosen with `profiles use`, else default)',
      helpGroup: 'GLOBAL',
    }),
  };

  private client?: RpcClient;

  /** --url for commands that talk to a daemon: a gateway on another host or through an SSH tunnel. */
  static urlFlag = Flags.string({
    description: 'gateway to talk to, such as ws://host:18789 (else GATEWAY_URL, else this profile\'s own daemon)',
    env: 'GATEWAY_URL',
    helpGroup: 'GLOBAL',
  });

  /** Human text on stdout; nothing under --json. */
  protected say(text = ''): void {
    if (!this.jsonEnabled()) process.stdout.write(`${text}\n`);
  }

  /** Progress and notes on stderr, also under --json (stdout stays one document). */
  protected note(text: string): void {
    process.stderr.write(`${text}\n`);
  }

  protected warning(text: string): void {
    process.stderr.write(`Warning: ${text}\n`);
  }

  /** Sets the exit code of a command that still prints its result (status: stopped, stale). */
  protected exitWith(code: ExitCode): void {
    process.exitCode = code;
  }

  protected selectProfile(flag: string | undefined): ProfileRef {
    const { name, source } = selectProfileName(flag);
    return { name, source, paths: profilePaths(name, gatewayHome()) };
  }

  /** A profile that must exist already (exit 5 otherwise). */
  protected existingProfile(flag: string | undefined): ProfileRef {
    const ref = this.selectProfile(flag);
    requireProfile(ref.name, ref.paths.home);
    return ref;
  }

  /**
   * An RPC client connected to the profile's daemon (exit 3 with a hint when it
   * is not running), or to the gateway at --url with this profile's device key.
   */
  protected async rpc(profile: ProfileRef, url?: string): Promise<RpcClient> {
    if (url) {
      const [{ connectRemote, normalizeUrl }, { ensureProfile }, { openSecretStore }] = await Promise.all([
        import('./remote.ts'), import('../shared/profile-setup.ts'), import('../shared/secrets/secret-store.ts'),
      ]);
      const setup = await ensureProfile(profile.paths);
      this.client = await connectRemote(normalizeUrl(url), openSecretStore(profile.paths, setup.backend));
      return this.client;
    }
    requireProfile(profile.name, profile.paths.home);
    const { connectToDaemon } = await import('./rpc-client.ts');
    this.client = await connectToDaemon(profile.paths);
    return this.client;
  }

  override async finally(error: Error | undefined): Promise<unknown> {
    this.client?.close();
    return super.finally(error);
  }

  override logJson(json: unknown): void {
    process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
  }

  override async catch(error: Error & { oclif?: { exit?: number }; exitCode?: number }): Promise<unknown> {
    const failure = toGatewayError(error, this.id?.replaceAll(':', ' '));
    process.exitCode = failure.exitCode;
    if (this.jsonEnabled()) this.logJson(errorJson(failure));
    process.stderr.write(errorText(failure));
    if (!(failure.exitCode === ExitCode.usage || error instanceof GatewayError) && process.env.GATEWAY_DEBUG) {
      process.stderr.write(`${error.stack}\n`);
    }
    return undefined;
  }

  abstract override run(): Promise<T>;
}

function toGatewayError(error: Error & { oclif?: { exit?: number }; exitCode?: number }, command = '<command>'): GatewayError {
  if (error instanceof GatewayError) return error;
  const exit = error.oclif?.exit;
  if (exit === 2 || error.name === 'NonExistentFlagsError' || /Unexpected argument|Missing required|Expected --|Nonexistent flag/i.test(error.message)) {
    // Ids are base64url and may start with '-' (a device id one time in 64): oclif takes such an id for a flag.
    const id = /Nonexistent flags?: (-[A-Za-z0-9_-]{15,})(?=[\s,]|$)/.exec(error.message)?.[1];
    const hints = id ? [`an id that starts with '-' goes after '--': gateway ${command} -- ${id}`] : [`gateway ${command} --help`];
    return new GatewayError(error.message.replace(/\nSee more help with --help$/, ''), { exitCode: ExitCode.usage, hints });
  }
  return asGatewayError(error);
}
