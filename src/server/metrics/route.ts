/**
 * GET /metrics in the Prometheus text format, when metrics.enabled is on: to
 * the gateway credential or a token with the scope `metrics` (and, with
 * metrics.loopbackOpen, to clients on this host without one).
 */
import type { IncomingMessage } from 'node:http';
import { isLoopbackAddress } from '../../shared/config/exposure.ts';
import { DomainError } from '../kernel/errors.ts';
import type { ModuleContext } from '../kernel/module.ts';
import type { MetricSeries } from './series.ts';

const FORWARDING = ['forwarded', 'x-forwarded-for', 'x-real-ip', 'x-forwarded-host', 'x-forwarded-proto'];
/** A client on this host that came straight, not through a proxy on it. */
export const directLoopback = (req: Pick<IncomingMessage, 'socket' | 'headers'>) =>
  isLoopbackAddress(req.socket.remoteAddress ?? '') && FORWARDING.every((header) => req.headers[header] === undefined);

const errorBody = (description: string) => ({ description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } });

/** Serves GET /metrics from the series, loaded (and counting) at the first scrape if they were not already. */
export function metricsRoute(ctx: Pick<ModuleContext, 'http' | 'config'>, load: () => Promise<MetricSeries>): void {
  ctx.http.route({
    method: 'GET', path: '/metrics',
    enabled: () => {
      if (!ctx.config().metrics.enabled) throw new DomainError('not_found', 'Metrics are off: gateway config set metrics.enabled true');
      return true;
    },
    // The scope metrics, or nothing from a direct loopback caller where metrics.loopbackOpen allows it.
    auth: { scope: 'metrics', open: (req) => ctx.config().metrics.loopbackOpen && directLoopback(req) },
    handler: async (http) => {
      const loaded = await load();
      loaded.count(true);
      await loaded.jobCollect();
      http.type = loaded.registry.contentType;
      http.body = await loaded.registry.metrics();
    },
  });
  ctx.http.document({
    paths: {
      '/metrics': {
        get: {
          summary: 'the daemon\'s metrics in the Prometheus text format (metrics.enabled); the gateway credential or a token with the scope metrics',
          responses: {
            200: { description: 'Prometheus text format 0.0.4' },
            401: errorBody('no credential, or one that is not valid'),
            403: errorBody('a token without the scope metrics'),
            404: errorBody('metrics are off'),
            429: errorBody('too many requests or failed attempts; see Retry-After'),
          },
        },
      },
    },
  });
}
