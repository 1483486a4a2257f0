import { expect } from 'chai';
import type { AutomationSettings } from '../../../../src/shared/config/types.ts';
import type { AgentRunRequest, RunOutcome } from '../../../../src/server/agents/module.ts';
import type { OutboxItem } from '../../../../src/server/channels/module.ts';
import { FiringMaker, type FiringPayload } from '../../../../src/server/automations/firing-maker.ts';
import { FiringRun } from '../../../../src/server/automations/firing-run.ts';
import { Firings } from '../../../../src/server/automations/firings.ts';
import { JobQueue } from '../../../../src/server/jobs/job-queue.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import type { Session } from '../../../../src/server/sessions/session-store.ts';
import { freshStore } from '../../../support/store.ts';

const settings = (action: AutomationSettings['action'], more: Partial<AutomationSettings> = {}): AutomationSettings => ({ enabled: true, trigger: { hook: 'h' }, action, catchUp: 'last', ...more });
const session = (key: string): Session => ({ key, channel: 'irc', account: 'main', kind: 'direct', peer: 'ann', peerName: null, createdAt: 0, updatedAt: 0, messageCount: 1 });

describe('automations: what a firing does', () => {
  const store = freshStore();
  let automations: Record<string, AutomationSettings>;
  let replies: { item: OutboxItem; inTransaction: boolean }[];
  let runs: AgentRunRequest[];
  let outcome: Partial<RunOutcome>;
  let events: [string, unknown][];
  let firings: Firings;
  let runner: FiringRun;

  beforeEach(() => {
    automations = {};
    replies = [];
    runs = [];
    events = [];
    outcome = { runId: 'run_1', status: 'succeeded', text: 'The answer.', usage: { inputTokens: 3, outputTokens: 2 } };
    firings = new Firings(store());
    runner = new FiringRun({
      automations: () => automations, store: store(), firings,
      reply: async (item, db) => {
        replies.push({ item, inTransaction: db !== undefined && db !== store() });
        return true;
      },
      sessions: { get: async (key) => (key === 'irc:main:ann' ? session(key) : undefined) },
      run: async (request) => {
        runs.push(request);
        return outcome as RunOutcome;
      },
      emit: (event, payload) => void events.push([event, payload]),
    });
  });

  /** Fires an automation as a hook would: its row and its job; the job's payload. */
  const fire = async (automation: string, fields: Record<string, unknown> = {}): Promise<FiringPayload> => {
    const [made] = await store().transaction((tx) => new FiringMaker(firings, new JobQueue(store())).make(tx, [{ automation, key: 'k1', scheduledFor: 1_000, firedBy: 'hook', fields }]));
    return JSON.parse((await store().get<{ payload: string }>('SELECT payload FROM job_payloads WHERE job_id = ?', made!.jobId))!.payload) as FiringPayload;
  };
  const row = (automation: string) => firings.get(automation, 'k1');
  const refusal = (promise: Promise<unknown>) => promise.then(() => expect.fail('expected a refusal'), (error: unknown) => error as DomainError);

  it('a removed or disabled automation does nothing, and says why in its runs', async () => {
    const gone = await fire('gone');
    expect(await runner.handle(gone, { attempt: 1 })).to.deep.equal({ skipped: 'the automation was removed before it ran' });
    expect((await row('gone'))!.skipped).to.equal('the automation was removed before it ran');
    automations.off = settings({ agent: 'main', prompt: 'x' }, { enabled: false });
    expect(await runner.handle(await fire('off'), { attempt: 1 })).to.deep.equal({ skipped: 'the automation was disabled before it ran' });
    expect(runs.length + replies.length).to.equal(0);
  });

  it('a message is filled from the trigger\'s fields and goes to the outbox with its record, under the firing\'s key', async () => {
    automations.notify = settings({ message: { channel: 'irc', to: '#ops', text: 'deployed {{payload.version}} ({{firedBy}})' } });
    const result = await runner.handle(await fire('notify', { payload: { version: '1.2' } }), { attempt: 1 });
    expect(result).to.deep.equal({ text: 'deployed 1.2 (hook)', deliveredTo: 'irc:default:#ops' });
    expect(replies).to.deep.equal([{ item: { channel: 'irc', account: 'default', to: '#ops', text: 'deployed 1.2 (hook)', key: 'automation:notify:k1' }, inTransaction: true }]);
    expect(await row('notify')).to.include({ answer: 'deployed 1.2 (hook)', delivered_to: 'irc:default:#ops', run_id: null });
    expect(events).to.deep.equal([['automations.fired', { automation: 'notify', key: 'k1', scheduledFor: '1970-01-01T00:00:01.000Z' }]]);
  });

  it('refuses a message or a prompt that is empty once filled', async () => {
    automations.blank = settings({ message: { channel: 'irc', to: '#ops', text: '{{payload.missing}}' } });
    expect((await refusal(runner.handle(await fire('blank'), { attempt: 1 }))).message).to.match(/message of automation blank is empty/);
    automations.quiet = settings({ agent: 'main', prompt: '  ' });
    expect((await refusal(runner.handle(await fire('quiet'), { attempt: 1 }))).message).to.match(/prompt of automation quiet is empty/);
    expect(replies).to.deep.equal([]);
  });

  it('runs the agent for the automation itself, in a session of its own, and delivers the answer where it says', async () => {
    automations.daily = settings({ agent: 'main', prompt: 'Summarise {{hook}}', deliver: { channel: 'irc', account: 'main', to: 'ann' } });
    const result = await runner.handle(await fire('daily', { hook: 'the day' }), { attempt: 1 });
    expect(runs).to.have.length(1);
    expect(runs[0]).to.deep.include({
      agentId: 'main', text: 'Summarise the day', surface: 'automation', subject: 'automation:daily', person: 'automation:daily',
      sender: { id: 'automation:daily', name: 'daily', person: 'automation:daily' },
      session: { channel: 'automation', account: 'daily', kind: 'direct', peer: 'k1' },
    });
    expect(result).to.deep.equal({ runId: 'run_1', text: 'The answer.', usage: { inputTokens: 3, outputTokens: 2 }, deliveredTo: 'irc:main:ann' });
    expect(replies.map(({ item }) => item)).to.deep.equal([{ channel: 'irc', account: 'main', to: 'ann', text: 'The answer.', key: 'automation:daily:k1', runId: 'run_1' }]);
    expect(await row('daily')).to.include({ run_id: 'run_1', answer: 'The answer.', usage: '{"inputTokens":3,"outputTokens":2}' });
  });

  it('continues a session it names, delivering to it; its prompt is then no one\'s words', async () => {
    automations.followup = settings({ agent: 'main', prompt: 'Any news?', session: 'irc:main:ann', deliver: 'session' });
    await runner.handle(await fire('followup'), { attempt: 1 });
    expect(runs[0]!.session).to.deep.equal({ key: 'irc:main:ann' });
    expect(runs[0]!.sender).to.deep.equal({ id: 'automation:followup', name: 'followup' });
    expect(replies[0]!.item).to.deep.include({ channel: 'irc', account: 'main', to: 'ann', sessionKey: 'irc:main:ann' });
    automations.lost = settings({ agent: 'main', prompt: 'x', session: 'irc:main:nobody' });
    expect((await refusal(runner.handle(await fire('lost'), { attempt: 1 }))).status).to.equal(404);
  });

  it('an empty answer is recorded but not delivered; a run that did not succeed fails the attempt', async () => {
    automations.mute = settings({ agent: 'main', prompt: 'x', deliver: { channel: 'irc', to: '#ops' } });
    outcome = { ...outcome, text: ' ' };
    expect(await runner.handle(await fire('mute'), { attempt: 1 })).to.include({ deliveredTo: null });
    expect(replies).to.deep.equal([]);
    automations.failing = settings({ agent: 'main', prompt: 'x' });
    outcome = { runId: 'run_2', status: 'failed', error: 'model down', text: '', usage: {} };
    const failed = await refusal(runner.handle(await fire('failing'), { attempt: 1 }));
    expect([failed.status, failed.message]).to.deep.equal([503, 'The run run_2 ended failed: model down.']);
  });

  it('a retried firing whose earlier attempt answered gives that answer again, without running or delivering', async () => {
    automations.once = settings({ agent: 'main', prompt: 'x', deliver: { channel: 'irc', to: '#ops' } });
    const payload = await fire('once');
    const first = await runner.handle(payload, { attempt: 1 });
    const again = await runner.handle(payload, { attempt: 2 });
    expect(again).to.deep.equal(first);
    expect(runs).to.have.length(1);
    expect(replies).to.have.length(1);
  });

  it('finds where an answer goes: the action\'s channel, the session it delivers to, or nowhere', async () => {
    expect(await runner.destination(settings({ agent: 'main', prompt: 'x' }), 'irc:main:ann')).to.equal(undefined);
    expect(await runner.destination(settings({ agent: 'main', prompt: 'x', deliver: 'session' }), undefined)).to.equal(undefined);
    expect(await runner.destination(settings({ agent: 'main', prompt: 'x', deliver: 'session' }), 'irc:main:ann')).to.deep.equal({ channel: 'irc', account: 'main', to: 'ann', sessionKey: 'irc:main:ann' });
    expect((await refusal(runner.destination(settings({ agent: 'main', prompt: 'x', deliver: 'session' }), 'irc:main:gone'))).status).to.equal(404);
  });
});
