/**
 * The browsers' own process, started by the daemon (browser-host-client.ts)
 * at the first browser.* call and gone a while after its last browser
 * closed: Playwright and everything it keeps live here, never in the
 * daemon, and are given back whole when it ends. It runs the browsers
 * (browsers.ts) as the daemon asks over its IPC channel, each call with the
 * settings and the workspace it acts in, and ends with the daemon (its
 * channel closing) whatever stopped it; the browsers' sandboxes end with it.
 */
import type { Logger } from 'pino';
import { DomainError, toDomainError } from '../kernel/errors.ts';
import type { BrowserAction, FromHost, HostCall, ToHost } from './browser-host-client.ts';
import { Browsers, type BrowserSettings } from './browsers.ts';
import { Workspace } from './workspace.ts';

const send = (message: FromHost) => process.send?.(message);

const forward = (level: 'info' | 'warn' | 'error') => (fields: unknown, message?: string) => {
  if (typeof fields === 'string') return send({ type: 'log', level, fields: {}, message: fields });
  const plain = Object.fromEntries(Object.entries(fields as Record<string, unknown>).map(([key, value]) => [key, value instanceof Error ? value.message : value]));
  send({ type: 'log', level, fields: plain, message: message ?? '' });
};
const logger = { info: forward('info'), warn: forward('warn'), error: forward('error'), debug: () => undefined } as unknown as Logger;

let settings: BrowserSettings | undefined;
/** Each agent's workspace, as the latest call said (a download finishing later goes there). */
const workspaces = new Map<string, HostCall['workspace']>();
const browsers = new Browsers({
  profileDir: process.argv[2]!,
  settings: () => settings!,
  logger,
  workspaceOf: (agent) => {
    const place = workspaces.get(agent ?? '');
    if (!place) throw new Error('no workspace is known for this browser');
    return new Workspace(place.root, place.owner);
  },
});

function act(call: HostCall): Promise<unknown> {
  const { agent, person } = call;
  const action: BrowserAction = call.action;
  switch (action.op) {
    case 'open': return browsers.use(agent, person, true, (browser) => browser.open(new URL(action.url), action.newPage));
    case 'snapshot': return browsers.use(agent, person, false, (browser) => browser.snapshot(action.page));
    case 'click': return browsers.use(agent, person, false, (browser) => browser.click(action.ref, action.page));
    case 'type': return browsers.use(agent, person, false, (browser) => browser.type(action.ref, action.text, action.submit, action.page));
    case 'screenshot': return browsers.use(agent, person, false, (browser) => browser.screenshot(action.page, action.fullPage, action.maxBytes));
    case 'closePage': return browsers.use(agent, person, false, (browser) => browser.closePage(action.page));
    case 'close': {
      const running = browsers.running(agent, person);
      if (!running) return Promise.resolve({ closed: 'none', pages: [] });
      return running.close('closed by browser.close').then(() => ({ closed: 'browser', pages: [] }));
    }
  }
}

let stopping = false;

async function stop(code: number): Promise<never> {
  stopping = true;
  await browsers.closeAll().catch(() => undefined);
  process.exit(code);
}

process.on('message', (message: ToHost) => {
  if (message.type === 'stop') return void stop(0);
  if (stopping) return;
  if (message.type === 'settings') {
    settings = message.settings;
    return;
  }
  settings = message.settings;
  workspaces.set(message.agent ?? '', message.workspace);
  void act(message).then(
    (result) => send({ type: 'answer', id: message.id, result, browsers: browsers.count }),
    (thrown: unknown) => {
      const { error, unexpected } = toDomainError(thrown);
      if (unexpected) logger.error({ err: thrown }, 'a browser call failed');
      const failure = unexpected ? new DomainError('internal', 'The browser failed; the gateway log has the details.') : error;
      send({
        type: 'failed', id: message.id, browsers: browsers.count,
        error: { kind: failure.kind, message: failure.message, ...(failure.reason ? { code: failure.reason } : {}), ...(failure.details ? { details: failure.details } : {}), headers: failure.headers, ...(failure.retryable === undefined ? {} : { retryable: failure.retryable }) },
      });
    },
  );
});

// The daemon gone (stopped, killed): so are the browsers.
process.on('disconnect', () => void stop(0));
// Signals to the daemon's process group are the daemon's to handle: it says when to stop.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => undefined);

// How many browsers run, told when it changes (one closed idle): the daemon ends this process once none has for a while.
let told = 0;
setInterval(() => {
  if (browsers.count === told) return;
  told = browsers.count;
  send({ type: 'browsers', count: told });
}, 1000).unref();

send({ type: 'ready' });
