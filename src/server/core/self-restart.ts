/**
 * A daemon restarting itself at an operator's request (the Control UI's
 * "Restart now"): the way it was started decides how. Under a systemd unit,
 * systemd is asked to restart the unit without waiting (the job is systemd's,
 * so it outlives this process); a daemon `gateway start` launched hands over
 * to `gateway restart`, in a session of its own, which stops this one and
 * starts the next with the same --port and --bind. A daemon in the foreground
 * (`gateway run` under a container runtime or another supervisor) has no one
 * here to start it again, and says so.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { underSystemd } from '../../shared/run-args.ts';
import { gatewayBin } from '../../shared/version.ts';
import { DomainError } from '../kernel/errors.ts';

/** The systemd unit this process runs in, from its cgroup (`.../user@1000.service/app.slice/gateway-x.service`). */
export function systemdUnit(cgroup: string): { unit: string; user: boolean } | undefined {
  const path = cgroup.split('\n').find((line) => line.startsWith('0::'))?.slice(3) ?? '';
  const unit = path.split('/').reverse().find((part) => part.endsWith('.service') && !/^user@\d+\.service$/.test(part));
  return unit ? { unit, user: /\/user@\d+\.service\//.test(path) } : undefined;
}

/** `gateway start` spawns `gateway run ... --detached` (src/cli/supervisor.ts); the process's own arguments say which it was. */
const startedByGatewayStart = (): boolean => process.argv.slice(2).includes('--detached');

export function restartSelf(profile: string): { via: string } {
  if (underSystemd()) {
    const found = (() => {
      try {
        return systemdUnit(readFileSync('/proc/self/cgroup', 'utf8'));
      } catch {
        return undefined;
      }
    })();
    if (found) {
      const args = [...(found.user ? ['--user'] : []), 'restart', '--no-block', found.unit];
      const done = spawnSync('systemctl', args, { encoding: 'utf8', timeout: 10_000 });
      if (done.status !== 0) {
        throw new DomainError('unavailable', `systemctl ${args.join(' ')} failed: ${(done.stderr || done.error?.message || 'no output').trim()}.`);
      }
      return { via: `systemctl ${args.join(' ')}` };
    }
  }
  if (startedByGatewayStart()) {
    const child = spawn(process.execPath, [gatewayBin(), 'restart', '--profile', profile], { detached: true, stdio: 'ignore', env: process.env });
    child.on('error', () => undefined);
    child.unref();
    return { via: 'gateway restart' };
  }
  throw new DomainError('conflict', 'This daemon runs in the foreground (gateway run): nothing here would start it again. Restart it where it was started, or with its supervisor.');
}
