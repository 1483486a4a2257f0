import { sign } from '@octokit/webhooks-methods';
import { randomUUID } from 'node:crypto';

/** The secret the webhook tests configure. */
export const TEST_WEBHOOK_SECRET = 'webhook-secret-for-tests';

/** A push payload of about `size` bytes, with the fields the gateway validates. */
export function pushPayload(size = 2048): Record<string, unknown> {
  const commits = [];
  for (let index = 0; JSON.stringify(commits).length < size; index++) {
    commits.push({ id: randomUUID().replace(/-/g, ''), message: `commit ${index} ${'x'.repeat(120)}`, author: { name: 'dev', email: 'dev@example.com' } });
  }
  return {
    ref: 'refs/heads/main', before: '0'.repeat(40), after: 'a'.repeat(40),
    repository: { id: 1, full_name: 'acme/widgets' }, head_commit: { id: 'a'.repeat(40), message: 'head' }, commits,
  };
}

/** POSTs a delivery to /webhooks, signed with the test secret unless told otherwise. */
export async function deliver(base: string, event: string, body: string, options: { secret?: string; deliveryId?: string; hookId?: string; contentType?: string; signature?: string } = {}) {
  const headers: Record<string, string> = {
    'content-type': options.contentType ?? 'application/json',
    'x-github-event': event,
    'x-github-delivery': options.deliveryId ?? randomUUID(),
    'x-hub-signature-256': options.signature ?? (await sign(options.secret ?? TEST_WEBHOOK_SECRET, body)),
  };
  if (options.hookId) headers['x-github-hook-id'] = options.hookId;
  const response = await fetch(`${base}/webhooks`, { method: 'POST', headers, body });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

