/**
 * The load generator in a process of its own (autocannon), so the process
 * that measures does not share its thread with the load: `node
 * bench/load-process.ts '{"url":...,"connections":50,"duration":10,"deliveries":false,"payload":"2-8k"}'`
 * prints one JSON line: {rps, p99, non2xx, total}.
 */
import autocannon from 'autocannon';
import { PAYLOADS, pushBodies, signedDeliveries } from './webhooks.ts';

const options = JSON.parse(process.argv[2] ?? '{}') as { url: string; connections: number; duration: number; deliveries?: boolean; payload?: keyof typeof PAYLOADS };
const result = await autocannon({
  url: options.url,
  connections: options.connections,
  duration: options.duration,
  ...(options.deliveries ? { requests: signedDeliveries(pushBodies(200, PAYLOADS[options.payload ?? '2-8k'])) } : {}),
});
process.stdout.write(`${JSON.stringify({ rps: result.requests.average, p99: result.latency.p99, non2xx: result.non2xx, total: result.requests.total })}\n`);
