/**
 * The configuration over RPC (`gateway config get|set|unset` while the
 * daemon runs, the Control UI's settings): read from the profile's file,
 * written there with its checks and the modules' (a change is refused for
 * the problems it would newly make, not for those the file had), then applied
 * and audited. The daemon is the file's one writer while it runs.
 */
import type { Logger } from 'pino';
import { getPath } from '../../shared/config/keys.ts';
import { changeConfigKeys, loadConfig } from '../../shared/config/profile-config.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { ConfigChange, ConfigPatchResult } from '../../shared/protocol/results.ts';
import { DomainError } from '../kernel/errors.ts';
import type { DaemonView, RpcClient } from '../kernel/module.ts';

export interface ConfigChangesDeps {
  daemon: Pick<DaemonView, 'paths' | 'configProblems' | 'applyConfig'>;
  config: () => GatewayConfig;
  log: Logger;
  audit: (kind: string, client: RpcClient, subject?: string) => void;
}

export class ConfigChanges {
  private readonly deps: ConfigChangesDeps;

  constructor(deps: ConfigChangesDeps) {
    this.deps = deps;
  }

  /** The whole configuration (what is in force and what the file sets), or one key with where its value comes from. */
  get(key: string | undefined) {
    const { raw, effective } = loadConfig(this.deps.daemon.paths);
    if (key === undefined) return { config: effective, set: raw };
    return { key, value: getPath(effective, key), source: getPath(raw, key) === undefined ? 'default' as const : 'config' as const };
  }

  /** Writes changes together (or checks them, with dryRun) and applies them when the file is whole. */
  async change(list: { key: string; value: unknown }[], client: RpcClient, dryRun = false): Promise<ConfigChange[]> {
    const { daemon, log } = this.deps;
    // Refused: what the change would newly leave a module unable to do (a problem it already had is not this change's).
    const before = new Set(daemon.configProblems(this.deps.config()));
    const changed = await changeConfigKeys(daemon.paths, list, { dryRun, check: (next) => daemon.configProblems(next).filter((problem) => !before.has(problem)) });
    if (dryRun) return changed;
    // A file mended only part of the way is not applied: the daemon keeps the settings it has.
    if (!changed.some((one) => one.remainingProblems)) daemon.applyConfig(loadConfig(daemon.paths).effective);
    const removed = list.every((one) => one.value === undefined);
    log.info({ ...(list.length === 1 ? { key: list[0]!.key } : { keys: list.map((one) => one.key) }), restartRequired: changed.some((one) => one.restartRequired), client: client.clientId }, removed ? 'configuration key removed' : 'configuration changed');
    for (const { key } of list) this.deps.audit('config.changed', client, key);
    return changed;
  }

  /** Several keys at once (config.patch): each with a value or unset. */
  async patch(changes: { key: string; value?: unknown; unset?: boolean }[], dryRun: boolean, client: RpcClient): Promise<ConfigPatchResult> {
    const missing = changes.find((one) => !one.unset && one.value === undefined);
    if (missing) throw new DomainError('invalid', `config.patch: the change of ${missing.key} needs a value, or unset: true.`);
    const changed = await this.change(changes.map(({ key, value, unset }) => ({ key, value: unset ? undefined : value })), client, dryRun);
    return {
      changes: changed, dryRun,
      restartRequired: changed.some((one) => one.restartRequired), reloadRequired: changed.some((one) => one.reloadRequired),
    };
  }
}
