/**
 * The daemon's metrics, when metrics.enabled is on: GET /metrics in the
 * Prometheus text format (route.ts) and the Overview's figures
 * (summary.ts), from one registry of series (series.ts). prom-client is
 * loaded when metrics are first enabled; until then nothing subscribes to
 * what the daemon publishes (kernel/observe.ts), and that costs nothing.
 */
import { defineModule } from '../kernel/module.ts';
import channelsModule from '../channels/module.ts';
import jobsModule from '../jobs/module.ts';
import { metricsRoute } from './route.ts';
import { metricSeries, type MetricSeries } from './series.ts';
import { type MetricJson, summaryOf } from './summary.ts';

export default defineModule({
  id: 'metrics',
  needs: [jobsModule, channelsModule],
  setup(ctx) {
    const jobs = ctx.use(jobsModule).queue;
    const { channels } = ctx.use(channelsModule);
    /** The registry and its series, made once, when metrics are first on (again after a failure). */
    let series: Promise<MetricSeries> | undefined;
    const load = () => (series ??= metricSeries({ jobs, channels }).catch((error: unknown) => {
      series = undefined;
      throw error;
    }));

    // Counting starts when metrics are on: at start, or when the setting is turned on while the daemon runs.
    ctx.onStart(async () => {
      if (ctx.config().metrics.enabled) await load();
    });
    // Turned on while the daemon runs: counting starts as the setting is written (the check sees every new configuration).
    ctx.configCheck((next) => {
      if (next.metrics.enabled) void load().then((loaded) => loaded.count(true), (error: unknown) => ctx.log.error({ err: error }, 'metrics could not be loaded'));
      else void series?.then((loaded) => loaded.count(false), () => undefined);
      return [];
    });
    ctx.onStop(() => series?.then((loaded) => loaded.count(false), () => undefined));

    // The Overview's figures, from the same registry: what an operator looks at first.
    ctx.rpc.method({
      name: 'metrics.summary',
      handler: async () => {
        if (!ctx.config().metrics.enabled) return { enabled: false };
        const loaded = await load();
        loaded.count(true);
        await loaded.jobCollect();
        return { enabled: true, figures: summaryOf(await loaded.registry.getMetricsAsJSON() as unknown as MetricJson[]) };
      },
    });
    metricsRoute(ctx, load);
  },
});
