// The webhook intake users build from common parts, for the benchmark's comparison: Fastify takes
// each signed delivery, @octokit/webhooks-methods checks its signature, and the answer leaves once
// BullMQ has stored the delivery's job in Redis (the delivery id as the job id, so a redelivery is
// not queued twice). A BullMQ worker in the same process runs the jobs, as the gateway's daemon does.
// `node bench/stacks/bullmq-server.ts <redis port> <secret>` prints its port; runs until killed.
import { verify } from '@octokit/webhooks-methods';
import { Queue, Worker } from 'bullmq';
import Fastify from 'fastify';

const [redisPort, secret] = process.argv.slice(2);
if (!redisPort || !secret) throw new Error('usage: bullmq-server.ts <redis port> <secret>');
const connection = { host: '127.0.0.1', port: Number(redisPort) };
const queue = new Queue('github', { connection });
const worker = new Worker('github', async (job) => {
  const { body } = job.data as { body: { ref?: string; commits?: unknown[] } };
  return { ref: body.ref, commits: body.commits?.length ?? 0 };
}, { connection, concurrency: 10 });

// A part that fails (Redis away, a client it cannot load) stops the server, which the benchmark then reports.
for (const part of [queue, worker]) {
  part.on('error', (error: Error) => {
    process.stderr.write(`bullmq-server: ${error.message}\n`);
    process.exit(1);
  });
}

const app = Fastify({ logger: false, bodyLimit: 1024 * 1024 });
// The signature covers the raw body: take it as text, check it, then parse.
app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => done(null, body));
app.post('/webhooks', async (request, reply) => {
  const signature = request.headers['x-hub-signature-256'];
  const event = request.headers['x-github-event'];
  const id = request.headers['x-github-delivery'];
  const raw = request.body as string;
  if (typeof event !== 'string' || typeof id !== 'string') return reply.code(400).send({ error: 'missing GitHub headers' });
  if (typeof signature !== 'string' || !(await verify(secret, raw, signature))) return reply.code(401).send({ error: 'bad signature' });
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    return reply.code(400).send({ error: 'not JSON' });
  }
  await queue.add(`github.${event}`, { event, deliveryId: id, body }, { jobId: id, removeOnComplete: { age: 3600 }, attempts: 5 });
  return reply.code(202).send({ ok: true, deliveryId: id });
});
await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${(app.server.address() as { port: number }).port}\n`);
process.on('SIGTERM', () => {
  void Promise.allSettled([app.close(), worker.close(), queue.close()]).then(() => process.exit(0));
});
