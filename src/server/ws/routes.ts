import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { holds, type HttpAuthenticator } from '../auth/http-auth.ts';
import { DomainError, toDomainError } from '../kernel/errors.ts';
import type { RegistryTable } from '../kernel/registry.ts';
import { refuseUpgrade } from './refuse-upgrade.ts';
import { lazyUpgrader } from './upgrader.ts';

/**
 * Upgrades to the WebSocket endpoints modules and plugins registered. A reload
 * swaps the table for new upgrades only: sockets already open stay open with
 * the handler they got.
 */
export function routeUpgrade(table: () => RegistryTable, authenticator: HttpAuthenticator, logger: Logger) {
  const upgrade = lazyUpgrader();
  return (request: IncomingMessage, socket: Duplex, head: Buffer): boolean => {
    const path = (request.url ?? '/').split('?')[0]!;
    const entry = table().ws.get(path);
    if (!entry) return false;
    const accept = () => upgrade(request, socket, head, (ws) => {
      try {
        entry.value.handler(ws, request);
      } catch (error) {
        logger.error({ err: error, owner: entry.owner, path }, 'WebSocket handler failed');
        ws.close(1011, 'plugin failed');
      }
    });
    if (entry.value.auth === 'plugin') {
      accept();
      return true;
    }
    authenticator.authenticate(request).then(
      (principal) => (holds(principal, 'admin') ? accept() : refuseUpgrade(socket, request, new DomainError('forbidden', `${path} needs the gateway credential or a token with the scope admin.`))),
      (thrown: unknown) => refuseUpgrade(socket, request, toDomainError(thrown).error),
    );
    return true;
  };
}
