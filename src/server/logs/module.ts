/**
 * The daemon's log over the WebSocket: the last lines (logs.tail) and a live
 * tail (logs.follow) pushed as log.entries to the clients that asked, in
 * batches (log-tail.ts).
 */
import { defineModule } from '../kernel/module.ts';
import { LOG_LIMITS, LogTail } from './log-tail.ts';

export { LOG_LIMITS };

export default defineModule({
  id: 'logs',
  setup(ctx) {
    const log = new LogTail({ logFile: () => ctx.daemon.logFile, onLog: (listener) => ctx.daemon.onLog(listener) });
    ctx.connections.onAdmitted((client, _params, push) => log.admitted(client.connectionId, push));
    ctx.connections.onClosed((client) => log.closed(client.connectionId));
    ctx.onStop(() => log.stop());
    ctx.rpc.method({ name: 'logs.tail', handler: (params) => log.tail(params) });
    ctx.rpc.method({
      name: 'logs.follow',
      handler: ({ level }, client) => {
        log.follow(client.connectionId, level);
        return { following: true as const };
      },
    });
    ctx.rpc.method({
      name: 'logs.unfollow',
      handler: (_params, client) => {
        log.unfollow(client.connectionId);
        return { following: false as const };
      },
    });
  },
});
