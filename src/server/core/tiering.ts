/**
 * V8's own tiering counts, back once the daemon is ready. It starts with ten
 * times V8's invocation counts (DAEMON_NODE_FLAGS) so that start-up, which
 * runs much of its code a few hundred times and then never again, does not
 * bring V8's optimising compilers into memory (about 5 MB of resident code in
 * a daemon that then idles). Kept after start-up, the same counts leave a
 * first load on interpreted code for its first seconds: GET /healthz ran at
 * 0.78-0.98x a bare server over the first 2 s of load, against 0.96-1.05x with
 * V8's counts (6 fresh daemons each), with the same RSS after ready. V8 reads
 * the counts each time it sets a function's budget, so changing them here
 * takes effect for what runs from now on.
 */
import { DAEMON_READY_NODE_FLAGS, daemonFlagsInForce } from '../../shared/run-args.ts';

/** Lowers the counts to V8's, when the daemon was started with the raised ones (and not with counts of the user's own). */
export function restoreTiering(execArgv: readonly string[] = process.execArgv): boolean {
  if (!daemonFlagsInForce('--invocation-count-', execArgv)) return false;
  const v8 = process.getBuiltinModule('node:v8');
  for (const flag of DAEMON_READY_NODE_FLAGS) v8.setFlagsFromString(flag);
  return true;
}
