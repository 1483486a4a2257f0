import { Command, Flags, type Interfaces } from '@oclif/core';
import { asGatewayError, errorJson, errorText, GatewayError } from '../shared/errors.ts';
import { ExitCode } from '../shared/exit-codes.ts';
import { gatewayHome, profilePaths, type ProfilePaths } from '../shared/profile.ts';
import { requireProfile, selectProfileName } from '../shared/profiles.ts';
import { suggestions } from '../shared/suggest.ts';
import { visibleJson } from '../shared/visible-text.ts';
import type { RpcClient } from './rpc-client.ts';

/** The bounds oclif's own parse() declares. */
type FlagOutput = Record<string, any>;
type ArgOutput = FlagOutput;
type Input<F extends FlagOutput, B extends FlagOutput, A extends ArgOutput> = Interfaces.Input<F, B, A>;
type ParserOutput<F extends FlagOutput, B extends FlagOutput, A extends ArgOutput> = Interfaces.ParserOutput<F, B, A>;

/** A token that may be an id starting with '-' (ids are base64url, at least 16 characters). */
const DASHED_ID = /^-[A-Za-z0-9_-]{15,}$/;
/** The length of a device id: a SHA-256 in base64url. */
const DEVICE_ID_LENGTH = 43;
/** Put before such a token while oclif parses, so it reads as a value; taken off after. */
const VALUE_MARK = '\u0000';

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

  /**
   * Ids are base64url, so one device id in 64 starts with '-', and oclif would
   * take it for a flag. A token shaped like an id that names no flag of the
   * command is read as the value it is, wherever it stands.
   */
  protected override async parse<F extends FlagOutput, B extends FlagOutput, A extends ArgOutput>(
    options?: Input<F, B, A>, argv: string[] = this.argv,
  ): Promise<ParserOutput<F, B, A>> {
    const defined = { ...this.ctor.baseFlags, ...(options ?? this.ctor).flags } as Record<string, { char?: string; type?: string }>;
    const names = new Set(['--json', '--help', ...Object.keys(defined).map((name) => `--${name}`)]);
    // Short flags that take a value may have it glued on (-pwork); a boolean one (-h, -y) cannot.
    const glued = new Set(Object.values(defined).filter((flag) => flag.type === 'option' && flag.char).map((flag) => flag.char!));
    const isFlag = (token: string) => {
      if (names.has(token.split('=')[0]!)) return true;
      // Flag names are lowercase words: '--' and then only those is a mistyped flag, not an id.
      if (token[1] === '-') return !/[A-Z0-9_]/.test(token);
      // A device id (43 characters) is longer than any value glued to a short flag.
      return token.length !== DEVICE_ID_LENGTH && glued.has(token[1]!);
    };
    const marked = argv.map((token) => (DASHED_ID.test(token) && !isFlag(token) ? `${VALUE_MARK}${token}` : token));
    if (marked.every((token, index) => token === argv[index])) return super.parse(options, argv);
    const result = await super.parse(options, marked).catch((error: unknown) => {
      // A refusal that quotes the token ("Unexpected argument") quotes it as it was typed.
      if (error instanceof Error) error.message = error.message.replaceAll(VALUE_MARK, '');
      throw error;
    });
    const unmark = (value: unknown): unknown => (typeof value === 'string' && value.startsWith(VALUE_MARK) ? value.slice(VALUE_MARK.length)
      : Array.isArray(value) ? value.map(unmark) : value);
    for (const parsed of [result.args, result.flags] as Record<string, unknown>[]) {
      for (const key of Object.keys(parsed)) parsed[key] = unmark(parsed[key]);
    }
    result.argv = result.argv.map(unmark);
    this.argv = [...argv];
    return result;
  }

  override logJson(json: unknown): void {
    process.stdout.write(`${visibleJson(json, 2)}\n`);
  }

  override async catch(error: Error & { oclif?: { exit?: number }; exitCode?: number }): Promise<unknown> {
    const failure = toGatewayError(error, this.id?.replaceAll(':', ' '), Object.keys({ ...this.ctor.baseFlags, ...this.ctor.flags }));
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

function toGatewayError(error: Error & { oclif?: { exit?: number }; exitCode?: number; flags?: string[] }, command = '<command>', flags: string[] = []): GatewayError {
  if (error instanceof GatewayError) return error;
  const exit = error.oclif?.exit;
  if (exit === 2 || error.name === 'NonExistentFlagsError' || /Unexpected argument|Missing required|Expected --|Nonexistent flag/i.test(error.message)) {
    let message = error.message.replace(/\nSee more help with --help$/, '');
    // A near miss of a flag the command has (--scopes for --scope) names the one meant.
    const unknown = Array.isArray(error.flags) ? error.flags.map((flag) => flag.replace(/^-+/, '').split('=')[0]!) : [];
    const meant = unknown.flatMap((flag) => suggestions(flag, [...flags, 'json', 'help']).slice(0, 1)).map((flag) => `--${flag}`);
    if (meant.length > 0) message = `${message}. Did you mean ${meant.join(' and ')}?`;
    return new GatewayError(message, { kind: 'invalid', hints: [`gateway ${command} --help`] });
  }
  return asGatewayError(error);
}
