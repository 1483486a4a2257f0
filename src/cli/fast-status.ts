/**
 * `gateway status` and `gateway start` without oclif, for the plain forms
 * scripts, prompts and service files call again and again: the command,
 * `--json`, `--profile <name>` (`-p`, `--profile=`). Anything else (--url,
 * GATEWAY_URL, --help, --port, an unknown flag) returns undefined and goes to
 * the oclif command, which owns usage and its errors. The output is the
 * command's own (src/cli/status-report.ts, src/cli/start-flow.ts), byte for
 * byte.
 */
import { asGatewayError, errorJson, errorText } from '../shared/errors.ts';
import { ExitCode } from '../shared/exit-codes.ts';
import { gatewayHome, profilePaths } from '../shared/profile.ts';
import { requireProfile, selectProfileName } from '../shared/profiles.ts';

/** The flags of a plain status call, or undefined when oclif should take it. */
export function plainStatusFlags(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): { json: boolean; profile?: string } | undefined {
  if (env.GATEWAY_URL || env.GATEWAY_CONTENT_TYPE) return undefined;
  let json = false;
  let profile: string | undefined;
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index]!;
    if (arg === '--json' && !json) json = true;
    else if ((arg === '--profile' || arg === '-p') && profile === undefined && argv[index + 1] !== undefined && !argv[index + 1]!.startsWith('-')) profile = argv[++index];
    else if (arg.startsWith('--profile=') && profile === undefined && arg.length > '--profile='.length) profile = arg.slice('--profile='.length);
    else return undefined;
  }
  return { json, ...(profile === undefined ? {} : { profile }) };
}

/** Runs a plain call of a command as BaseCommand would: its result as --json, or its error with next steps. */
async function plain<T>(argv: readonly string[], command: (flags: { json: boolean; profile?: string }, exitWith: (code: number) => void) => Promise<T>): Promise<number | undefined> {
  const flags = plainStatusFlags(argv);
  if (!flags) return undefined;
  let exitCode: number = ExitCode.ok;
  try {
    const result = await command(flags, (code) => { exitCode = code; });
    if (flags.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return exitCode;
  } catch (error) {
    const failure = asGatewayError(error);
    if (flags.json) process.stdout.write(`${JSON.stringify(errorJson(failure), null, 2)}\n`);
    process.stderr.write(errorText(failure));
    return failure.exitCode;
  }
}

const output = (flags: { json: boolean }) => ({
  say: (text: string) => { if (!flags.json) process.stdout.write(`${text}\n`); },
  note: (text: string) => process.stderr.write(`${text}\n`),
  warning: (text: string) => process.stderr.write(`Warning: ${text}\n`),
});

/** Runs a plain status call and returns its exit code; undefined when it is not one. */
export function fastStatus(argv: readonly string[]): Promise<number | undefined> {
  return plain(argv, async (flags, exitWith) => {
    const { name } = selectProfileName(flags.profile);
    const paths = profilePaths(name, gatewayHome());
    requireProfile(name, paths.home);
    const { localStatus, reportStatus } = await import('./status-report.ts');
    return reportStatus(await localStatus(paths), { ...output(flags), exitWith });
  });
}

/** Runs a plain start call (no --port, --bind, --verbose or --timeout) and returns its exit code; undefined when it is not one. */
export function fastStart(argv: readonly string[]): Promise<number | undefined> {
  return plain(argv, async (flags) => {
    const { name, source } = selectProfileName(flags.profile);
    const { startProfile } = await import('./start-flow.ts');
    return startProfile({ name, source, paths: profilePaths(name, gatewayHome()) }, { timeout: 30_000 }, { ...output(flags), json: flags.json });
  });
}
