import { expect } from 'chai';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';
import type { AutomationSettings, GatewayConfig } from '../../../../src/shared/config/types.ts';
import { FiringMaker } from '../../../../src/server/automations/firing-maker.ts';
import { Firings } from '../../../../src/server/automations/firings.ts';
import { deliveryFirings, hookFirings, matchesDelivery, Triggers } from '../../../../src/server/automations/triggers.ts';
import { JobQueue } from '../../../../src/server/jobs/job-queue.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import { freshStore } from '../../../support/store.ts';

const say = { message: { channel: 'irc', to: '#ops', text: 'fired' } };
const config = (automations: Record<string, unknown>): GatewayConfig => effectiveConfig({ automations });
const settings = (trigger: AutomationSettings['trigger'], more: Partial<AutomationSettings> = {}): AutomationSettings => ({ enabled: true, trigger, action: say, catchUp: 'last', ...more });

describe('automations: what a delivery or a hook fires', () => {
  it('a webhook trigger matches its event, and the action, repository (any case) and ref it names', () => {
    const push = settings({ webhook: { event: 'push', repository: 'Acme/Site', ref: 'refs/heads/main' } });
    const body = { repository: { full_name: 'acme/site' }, ref: 'refs/heads/main' };
    expect(matchesDelivery(push, 'push', body)).to.equal(true);
    expect(matchesDelivery(push, 'issues', body), 'another event').to.equal(false);
    expect(matchesDelivery(push, 'push', { ...body, ref: 'refs/heads/dev' }), 'another ref').to.equal(false);
    expect(matchesDelivery(push, 'push', { ref: 'refs/heads/main' }), 'no repository').to.equal(false);
    expect(matchesDelivery({ ...push, enabled: false }, 'push', body), 'disabled').to.equal(false);
    const opened = settings({ webhook: { event: 'issues', action: 'opened' } });
    expect(matchesDelivery(opened, 'issues', { action: 'opened' })).to.equal(true);
    expect(matchesDelivery(opened, 'issues', { action: 'closed' })).to.equal(false);
    expect(matchesDelivery(settings({ hook: 'deploy' }), 'push', body), 'not a webhook trigger').to.equal(false);
  });

  it('a delivery fires each automation it matches, keyed by the delivery, with the fields templates read', () => {
    const automations = {
      pushes: settings({ webhook: { event: 'push' } }),
      issues: settings({ webhook: { event: 'issues' } }),
      off: settings({ webhook: { event: 'push' } }, { enabled: false }),
    };
    const body = { ref: 'refs/heads/main', repository: { full_name: 'acme/site' }, sender: { login: 'ann' } };
    const list = deliveryFirings(automations, [{ event: 'push', deliveryId: 'd-1', hookId: '42', body }, { event: 'ping', deliveryId: 'd-2', hookId: null, body: {} }], 5000);
    expect(list).to.deep.equal([{
      automation: 'pushes', key: 'delivery-42-d-1', scheduledFor: 5000, firedBy: 'webhook',
      fields: { event: 'push', delivery: 'd-1', action: null, repository: 'acme/site', ref: 'refs/heads/main', sender: 'ann', payload: body },
    }]);
    expect(deliveryFirings(automations, [{ event: 'issues', deliveryId: 'd-3', hookId: null, body: { action: 'opened' } }], 1)[0]).to.include({ automation: 'issues', key: 'delivery--d-3' });
  });

  it('a hook request fires every enabled automation naming the hook, under one key', () => {
    const automations = { a: settings({ hook: 'deploy' }), b: settings({ hook: 'deploy' }), c: settings({ hook: 'other' }), d: settings({ hook: 'deploy' }, { enabled: false }) };
    const list = hookFirings(automations, 'deploy', { version: 3 }, 'hook-k1', 7);
    expect(list.map((firing) => [firing.automation, firing.key, firing.firedBy])).to.deep.equal([['a', 'hook-k1', 'hook'], ['b', 'hook-k1', 'hook']]);
    expect(list[0]!.fields).to.deep.equal({ hook: 'deploy', payload: { version: 3 } });
  });

  describe('with the store', () => {
    const store = freshStore();
    let current: GatewayConfig;
    let triggers: Triggers;
    let queue: JobQueue;
    const payloadOf = async (jobId: string) => JSON.parse((await store().get<{ payload: string }>('SELECT payload FROM job_payloads WHERE job_id = ?', jobId))!.payload);
    beforeEach(() => {
      queue = new JobQueue(store());
      current = config({
        deploys: { trigger: { hook: 'deploy' }, action: say },
        pushes: { trigger: { webhook: { event: 'push' } }, action: say },
        paused: { enabled: false, trigger: { webhook: { event: 'issues' } }, action: say },
      });
      triggers = new Triggers({ config: () => current, store: store(), maker: new FiringMaker(new Firings(store()), queue), now: () => 1_000 });
    });

    it('listens for the events and hooks of enabled triggers only, worked out again when the configuration changes', () => {
      expect([...triggers.listens().events]).to.deep.equal(['push']);
      expect([...triggers.listens().hooks]).to.deep.equal(['deploy']);
      expect(triggers.deliveryFollower().wants('issues')).to.equal(false);
      expect(triggers.listens(), 'kept while the configuration is the same').to.equal(triggers.listens());
      current = config({ paused: { trigger: { webhook: { event: 'issues' } }, action: say } });
      expect(triggers.deliveryFollower().wants('issues')).to.equal(true);
      expect(triggers.hookFollower().wants('deploy')).to.equal(false);
    });

    it('a repeated Idempotency-Key fires a hook\'s automation once: the same job answers', async () => {
      const follower = triggers.hookFollower();
      const first = await follower.fire('deploy', { v: 1 }, 'key-1');
      const again = await follower.fire('deploy', { v: 2 }, 'key-1');
      expect(first).to.have.length(1);
      expect(again).to.deep.equal(first);
      expect(first[0]).to.include({ action: 'automation', automation: 'deploys' });
      expect(await queue.get(String(first[0]!.jobId))).to.include({ kind: 'automation.run', status: 'queued', maxAttempts: 5, source: 'automation:deploys' });
      expect((await payloadOf(String(first[0]!.jobId))).fields).to.deep.include({ hook: 'deploy', payload: { v: 1 }, firedBy: 'hook', automation: 'deploys' });
      const other = await follower.fire('deploy', {}, undefined);
      expect(other[0]!.jobId).to.not.equal(first[0]!.jobId);
    });

    it('a delivery\'s firings are made in the transaction that records it', async () => {
      await store().transaction((tx) => triggers.deliveryFollower().follow([{ event: 'push', deliveryId: 'd-9', hookId: null, body: { ref: 'r' } }], tx));
      expect((await new Firings(store()).recent('pushes', 5)).map((row) => [row.firing_key, row.fired_by])).to.deep.equal([['delivery--d-9', 'webhook']]);
      await store().transaction((tx) => triggers.deliveryFollower().follow([{ event: 'push', deliveryId: 'd-9', hookId: null, body: { ref: 'r' } }], tx));
      expect(await new Firings(store()).recent('pushes', 5), 'the same delivery fires once').to.have.length(1);
    });

    it('an operator fires an enabled automation at once, each time anew; a disabled one is a conflict', async () => {
      const one = await triggers.manual('pushes', current.automations.pushes!);
      const two = await triggers.manual('pushes', current.automations.pushes!);
      expect(one.key).to.match(/^manual-1000-/);
      expect(two.jobId).to.not.equal(one.jobId);
      expect((await queue.get(one.jobId))!.runAt).to.equal('1970-01-01T00:00:01.000Z');
      expect(await payloadOf(one.jobId)).to.deep.include({ automation: 'pushes', key: one.key, scheduledFor: 1000 });
      const refused = await triggers.manual('paused', current.automations.paused!).catch((error: unknown) => error);
      expect(refused).to.be.instanceOf(DomainError).with.property('status', 409);
    });
  });
});
