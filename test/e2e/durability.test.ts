import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { freePort, Home, waitFor } from '../support/cli.ts';
import { deliver, pushPayload, TEST_WEBHOOK_SECRET } from '../support/webhooks.ts';

describe('durability under kill -9 (e2e)', function () {
  this.timeout(120_000);
  let home: Home;
  afterEach(() => home.cleanup());

  it('keeps every acknowledged delivery exactly once, and completes its job after a restart', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    await home.run(['secrets', 'set', 'webhooks.github.secret'], { input: TEST_WEBHOOK_SECRET });
    const started = await home.run(['start', '--json']);
    expect(started.code).to.equal(0);

    const acknowledged = new Set<string>();
    let stop = false;
    const body = JSON.stringify(pushPayload(3000));
    const stream = async () => {
      while (!stop) {
        const deliveryId = randomUUID();
        try {
          const response = await deliver(base, 'push', body, { deliveryId, hookId: '1' });
          if (response.status === 200) acknowledged.add(deliveryId);
        } catch {
          // the daemon died under this request: it was never acknowledged
        }
      }
    };
    const streams = Array.from({ length: 8 }, () => stream());
    await waitFor(() => acknowledged.size >= 200, 30_000, '200 acknowledged deliveries');
    process.kill(started.json.pid, 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 300));
    stop = true;
    await Promise.all(streams);
    expect((await home.run(['status'])).code).to.equal(4);

    expect((await home.run(['start'])).code).to.equal(0);
    const token = home.token();
    const all = async () => {
      const jobs: { source: string; status: string }[] = [];
      let cursor: string | null = null;
      do {
        const response = await fetch(`${base}/jobs?kind=github.push&limit=200${cursor ? `&cursor=${cursor}` : ''}`, { headers: { authorization: `Bearer ${token}` } });
        const page = await response.json() as { jobs: { source: string; status: string }[]; nextCursor: string | null };
        jobs.push(...page.jobs);
        cursor = page.nextCursor;
      } while (cursor);
      return jobs;
    };
    const jobs = await waitFor(async () => {
      const current = await all();
      return current.every((job) => job.status === 'succeeded') ? current : undefined;
    }, 30_000, 'every job to complete');
    const bySource = new Map<string, number>();
    for (const job of jobs) bySource.set(job.source, (bySource.get(job.source) ?? 0) + 1);
    for (const deliveryId of acknowledged) expect(bySource.get(deliveryId), deliveryId).to.equal(1);
    expect([...bySource.values()].every((count) => count === 1)).to.equal(true);
  });
});
