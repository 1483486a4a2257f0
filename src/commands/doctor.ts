import { Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import type { Check } from '../cli/doctor.ts';

export interface DoctorResult {
  profile: string;
  ok: boolean;
  checks: Check[];
}

export default class Doctor extends BaseCommand<DoctorResult> {
  static override summary = 'Check the profile\'s set-up: each check says ok, warn or fail, why, and the command that fixes it.';
  static override description = 'Node version, folder and file modes, configuration, exposure rules, the port, stale locks, the keychain (and how to reach it over SSH), '
    + 'the service, disk space, state and log sizes, channel connections, signal-cli for Signal accounts, Delta Chat\'s engine and password for Delta Chat accounts, a missing webhook secret while deliveries arrive, tokens expiring within 7 days. '
    + '--fix applies only safe fixes (modes, a stale lock) and says what it changed. Exits 0 when nothing fails, 1 otherwise.';
  static override examples = ['<%= config.bin %> doctor', '<%= config.bin %> doctor --profile staging --json', '<%= config.bin %> doctor --fix'];
  static override flags = {
    fix: Flags.boolean({ description: 'apply the safe fixes: file and folder modes, a stale lock' }),
  };

  async run(): Promise<DoctorResult> {
    const { flags } = await this.parse(Doctor);
    const profile = this.selectProfile(flags.profile);
    const { runDoctor } = await import('../cli/doctor.ts');
    const checks = await runDoctor(profile.paths, { fix: flags.fix });
    const color = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
    const paint = (status: Check['status']) => {
      const text = status.toUpperCase().padEnd(4);
      if (!color) return text;
      return `\u001B[${status === 'ok' ? 32 : status === 'warn' ? 33 : 31}m${text}\u001B[0m`;
    };
    for (const check of checks) {
      this.say(`${paint(check.status)} ${check.name}: ${check.detail}`);
      if (check.fixed) this.say(`     fixed: ${check.fixed}`);
      if (check.fix && check.status !== 'ok') for (const line of check.fix.split('\n')) this.say(`     fix: ${line}`);
    }
    const failed = checks.filter((check) => check.status === 'fail').length;
    const warned = checks.filter((check) => check.status === 'warn').length;
    this.say(`\n${failed} failed, ${warned} warned, ${checks.length - failed - warned} ok (profile "${profile.name}").`);
    if (failed > 0) process.exitCode = 1;
    return { profile: profile.name, ok: failed === 0, checks };
  }
}
