import type { ConfigChange } from '../shared/config/profile-config.ts';
import type { GatewayConfig } from '../shared/config/types.ts';
import { keyOfProblem } from '../shared/config/keys.ts';
import { inspectDaemon } from '../shared/daemon-lock.ts';
import type { ProfilePaths } from '../shared/profile.ts';

export interface AppliedChange extends ConfigChange {
  profile: string;
  /** daemon: written by the running daemon (one writer); file: written directly while it is stopped. */
  via: 'daemon' | 'file';
}

/** Sets or unsets a key: through the running daemon's RPC, else straight into config.json. */
export async function applyConfigChange(paths: ProfilePaths, key: string, value: unknown): Promise<AppliedChange> {
  const found = inspectDaemon(paths);
  if (found.state === 'running' || found.state === 'starting') {
    const { connectToDaemon } = await import('./rpc-client.ts');
    const client = await connectToDaemon(paths);
    try {
      const change = value === undefined
        ? await client.call('config.unset', { key })
        : await client.call('config.set', { key, value });
      return { ...change, profile: paths.name, via: 'daemon' };
    } finally {
      client.close();
    }
  }
  const [{ changeConfig, readEffectiveConfig }, { unknownChannelProblems }, automations] = await Promise.all([
    import('../shared/config/profile-config.ts'), import('../shared/config/channel-kinds.ts'),
    key === 'automations' || key.startsWith('automations.') || key === 'agents' || key.startsWith('agents.') || key.startsWith('channels') ? import('../shared/automations.ts') : undefined,
  ]);
  // A channel id set now that names no kind, or an automation it leaves unable to fire, is refused; what the file held already is left to mend.
  const problems = (config: GatewayConfig) => [...unknownChannelProblems(config), ...(automations?.automationProblems(config) ?? [])];
  const before = new Set(problems(readEffectiveConfig(paths)));
  const change = await changeConfig(paths, key, value, { check: (next) => problems(next).filter((problem) => !before.has(problem)) });
  return { ...change, profile: paths.name, via: 'file', restartRequired: false, reloadRequired: false };
}

export function describeChange(change: AppliedChange, unset = false): string {
  const what = unset
    ? `Unset ${change.key}${change.value === undefined || change.remainingProblems ? '' : ` (its default, ${JSON.stringify(change.value)}, applies)`}`
    : `Set ${change.key} = ${JSON.stringify(change.value)}`;
  if (change.remainingProblems) {
    return `${what}. config.json still has ${change.remainingProblems.length === 1 ? 'a problem' : 'problems'}: ${change.remainingProblems.join('; ')}.`
      + ` Mend ${change.remainingProblems.length === 1 ? 'it' : 'them'} too: ${change.remainingProblems.map((problem) => `gateway config unset ${keyOfProblem(problem)}`).join('; ')}`;
  }
  if (change.via === 'file') return `${what} (profile "${change.profile}"; takes effect when the daemon starts).`;
  if (change.restartRequired) return `${what}. The running daemon needs a restart to apply it: gateway restart --profile ${change.profile}`;
  if (change.reloadRequired) return `${what}. Apply it without a restart: gateway reload --profile ${change.profile}`;
  return `${what}. The running daemon applied it.`;
}
