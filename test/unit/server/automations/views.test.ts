import { expect } from 'chai';
import type { AutomationSettings } from '../../../../src/shared/config/types.ts';
import { FiringMaker } from '../../../../src/server/automations/firing-maker.ts';
import { Firings } from '../../../../src/server/automations/firings.ts';
import { AutomationViews, brief } from '../../../../src/server/automations/views.ts';
import { JobQueue } from '../../../../src/server/jobs/job-queue.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import { freshStore } from '../../../support/store.ts';

const settings = (trigger: AutomationSettings['trigger'], action: AutomationSettings['action'] = { agent: 'main', prompt: 'p' }): AutomationSettings => ({ enabled: true, trigger, action, catchUp: 'last' });

describe('automations: as operators see them', () => {
  const store = freshStore();
  let automations: Record<string, AutomationSettings>;
  let views: AutomationViews;
  let queue: JobQueue;
  let firings: Firings;
  beforeEach(() => {
    automations = {};
    queue = new JobQueue(store());
    firings = new Firings(store());
    views = new AutomationViews({ automations: () => automations, firings, jobs: queue, nextOf: (id) => (id === 'hourly' ? Date.parse('2026-01-01T11:00:00Z') : undefined) });
  });

  it('pages through automations by id, each with when it fires next and its last firing', async () => {
    automations = { hourly: settings({ every: '1h' }), hook: settings({ hook: 'deploy' }), alpha: settings({ every: '1d' }) };
    await store().transaction((tx) => new FiringMaker(firings, queue).make(tx, [{ automation: 'hook', key: 'hook-1', scheduledFor: 5000, firedBy: 'hook' }]));
    const first = await views.list({ limit: 2 });
    expect(first.automations.map((view) => [view.id, view.nextAt, view.when])).to.deep.equal([['alpha', null, 'every 1d'], ['hook', null, 'hook deploy']]);
    expect(first.nextCursor).to.equal('hook');
    expect(first.automations[1]!.last).to.include({ key: 'hook-1', firedBy: 'hook', state: 'queued', attempts: 0, scheduledFor: '1970-01-01T00:00:05.000Z', firedAt: null, error: null });
    const rest = await views.list({ limit: 2, cursor: first.nextCursor! });
    expect(rest).to.deep.include({ nextCursor: null });
    expect(rest.automations.map((view) => [view.id, view.nextAt])).to.deep.equal([['hourly', '2026-01-01T11:00:00.000Z']]);
  });

  it('cuts long prompts and messages in a list, never in one automation\'s view', async () => {
    const long = 'x'.repeat(300);
    automations = { a: settings({ hook: 'h' }, { agent: 'main', prompt: long }), b: settings({ hook: 'h' }, { message: { channel: 'irc', to: '#x', text: long } }) };
    const listed = await views.list({});
    expect((listed.automations[0]!.action as { prompt: string }).prompt).to.have.length(200).and.match(/…$/);
    expect((listed.automations[1]!.action as { message: { text: string } }).message.text).to.have.length(200);
    expect((await views.get('a')).action).to.deep.equal({ agent: 'main', prompt: long });
    expect(brief({ ...listed.automations[0]!, action: { agent: 'main', prompt: 'short' } }).action).to.deep.equal({ agent: 'main', prompt: 'short' });
  });

  it('an unknown automation is not found, naming those there are', async () => {
    automations = { a: settings({ hook: 'h' }) };
    const error = await views.runs('nope').catch((thrown: unknown) => thrown);
    expect(error).to.be.instanceOf(DomainError).with.property('message', 'No automation nope (automations: a).');
    expect((error as DomainError).code).to.equal('automation_not_found');
    expect(() => new AutomationViews({ automations: () => ({}), firings, jobs: queue, nextOf: () => undefined }).existing('x')).to.throw(/automations: none/);
    expect(await views.runs('a')).to.deep.equal({ automation: 'a', runs: [] });
  });
});
