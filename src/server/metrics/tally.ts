/**
 * Counters and histograms for the hottest series (every HTTP request, every
 * model call): each label set's tallies found by one map lookup and updated
 * with a few additions, handed to prom-client's registry only when it is
 * scraped. prom-client's own metrics hash and check their labels on every
 * observation, which cost GET /healthz 15 % of its rate.
 */
type Labels = Record<string, string>;

interface Series { labels: Labels; count: number; sum: number; buckets: number[] }

/** A metric as prom-client's registry reads it. */
interface Exposed {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: string; aggregator: 'sum'; values: { metricName?: string; labels: Labels; value: number }[] }>;
}

export class Tally {
  private readonly series = new Map<string, Series>();
  private readonly bounds: readonly number[];

  constructor(bounds: readonly number[] = []) {
    this.bounds = bounds;
  }

  /** Adds one observation to the series of `key` (labels made only the first time the key is seen). */
  add(key: string, labels: () => Labels, value = 1): void {
    let series = this.series.get(key);
    if (!series) {
      series = { labels: labels(), count: 0, sum: 0, buckets: new Array<number>(this.bounds.length).fill(0) };
      this.series.set(key, series);
    }
    series.count++;
    series.sum += value;
    for (let index = 0; index < this.bounds.length; index++) {
      if (value <= this.bounds[index]!) {
        series.buckets[index]!++;
        break;
      }
    }
  }

  /** A counter of the observations (its value: their count, or their sum with `sum`). */
  counter(name: string, help: string, of: 'count' | 'sum' = 'count'): Exposed {
    return {
      name, help, type: 'counter', aggregator: 'sum',
      get: async () => ({ name, help, type: 'counter', aggregator: 'sum', values: [...this.series.values()].map((series) => ({ labels: series.labels, value: series[of] })) }),
    };
  }

  /** A histogram of the observations over the bounds. */
  histogram(name: string, help: string): Exposed {
    return {
      name, help, type: 'histogram', aggregator: 'sum',
      get: async () => {
        const values: { metricName?: string; labels: Labels; value: number }[] = [];
        for (const series of this.series.values()) {
          let cumulative = 0;
          this.bounds.forEach((bound, index) => {
            cumulative += series.buckets[index]!;
            values.push({ metricName: `${name}_bucket`, labels: { ...series.labels, le: String(bound) }, value: cumulative });
          });
          values.push({ metricName: `${name}_bucket`, labels: { ...series.labels, le: '+Inf' }, value: series.count });
          values.push({ metricName: `${name}_sum`, labels: series.labels, value: series.sum });
          values.push({ metricName: `${name}_count`, labels: series.labels, value: series.count });
        }
        return { name, help, type: 'histogram', aggregator: 'sum', values };
      },
    };
  }
}
