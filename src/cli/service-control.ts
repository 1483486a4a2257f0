/** Starting, stopping and waiting for a daemon that systemd manages. */
import { setTimeout as delay } from 'node:timers/promises';
import { inspectDaemon } from '../shared/daemon-lock.ts';
import { GatewayError } from '../shared/errors.ts';
import { httpUrl } from '../shared/listen.ts';
import type { ProfilePaths } from '../shared/profile.ts';
import { manage, serviceLogHint, unitState, type ServiceRecord } from './service.ts';


/** Waits until the service's daemon is ready; a unit that fails or a deadline that passes is an error pointing at the journal. */
export async function waitForService(paths: ProfilePaths, record: ServiceRecord, timeoutMs: number): Promise<{ pid: number; port: number; url: string }> {
  const started = Date.now();
  const deadline = started + timeoutMs;
  for (;;) {
    const found = inspectDaemon(paths);
    if (found.state === 'running') return { pid: found.record.pid, port: found.record.port, url: httpUrl(found.record.host, found.record.port) };
    const { active } = unitState(record);
    // A unit still inactive after 3 s was not started at all.
    if (active === 'failed' || (active === 'inactive' && Date.now() - started > 3000)) {
      throw new GatewayError(`The service ${record.unit} is ${active}: its daemon did not start.`, { hints: [serviceLogHint(record, paths.name)] });
    }
    if (Date.now() > deadline) throw new GatewayError(`The daemon of ${record.unit} was not ready within ${timeoutMs} ms.`, { hints: [serviceLogHint(record, paths.name)] });
    await delay(50);
  }
}

/** Starts the unit (nothing to do when it runs) and waits for its daemon. */
export async function startService(paths: ProfilePaths, record: ServiceRecord, timeoutMs: number) {
  const before = inspectDaemon(paths);
  if (before.state === 'running') return { state: 'already-running' as const, pid: before.record.pid, port: before.record.port, url: httpUrl(before.record.host, before.record.port) };
  const started = performance.now();
  manage(record, 'start');
  const ready = await waitForService(paths, record, timeoutMs);
  return { state: 'started' as const, ...ready, startMs: Math.round(performance.now() - started) };
}

/** Stops the unit, which stops its daemon, and waits until the daemon is gone. */
export async function stopService(paths: ProfilePaths, record: ServiceRecord, timeoutMs: number): Promise<{ state: 'stopped' | 'not-running'; pid?: number }> {
  const before = inspectDaemon(paths);
  manage(record, 'stop');
  if (before.state !== 'running' && before.state !== 'starting') return { state: 'not-running' };
  const deadline = Date.now() + timeoutMs;
  while (inspectDaemon(paths).state === 'running' || inspectDaemon(paths).state === 'starting') {
    if (Date.now() > deadline) throw new GatewayError(`The daemon of ${record.unit} did not stop within ${timeoutMs} ms.`, { hints: [serviceLogHint(record, paths.name)] });
    await delay(50);
  }
  return { state: 'stopped', pid: before.record.pid };
}

