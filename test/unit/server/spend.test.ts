import { expect } from 'chai';
import { effectiveConfig } from '../../../src/shared/config/keys.ts';
import type { GatewayConfig } from '../../../src/shared/config/types.ts';
import { DomainError } from '../../../src/server/kernel/errors.ts';
import { Budgets, periodOf, type BudgetNotice } from '../../../src/server/models/budgets.ts';
import { costOf, priceOf } from '../../../src/server/models/prices.ts';
import { UsageLog, type ModelCall } from '../../../src/server/models/usage-log.ts';
import { freshStore } from '../../support/store.ts';

const config = (raw: Record<string, unknown>): GatewayConfig => effectiveConfig(raw);

describe('spend: prices, costs and budgets (in process, a real store)', () => {
  it('prices a model from its provider\'s setting, else from the bundled table for the hosts it knows, else not at all', async () => {
    const settings = config({
      models: {
        providers: {
          openai: { kind: 'openai-compatible', baseUrl: 'https://api.openai.com/v1', models: ['gpt-4o'], prices: { 'my-tune': { input: 3, output: 12, cachedInput: 1 } } },
          claude: { kind: 'anthropic', models: ['claude-sonnet-4-5'] },
          local: { kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:11434/v1', models: ['gpt-4o'] },
        },
      },
    });
    expect(await priceOf(settings, 'openai', 'my-tune')).to.deep.equal({ input: 3, output: 12, cachedInput: 1, currency: 'USD', source: 'configured' });
    expect(await priceOf(settings, 'openai', 'gpt-4o')).to.deep.include({ input: 2.5, output: 10, currency: 'USD', source: 'bundled' });
    expect(await priceOf(settings, 'claude', 'claude-sonnet-4-5')).to.deep.include({ input: 3, output: 15, source: 'bundled' });
    expect(await priceOf(settings, 'local', 'gpt-4o'), 'a local server costs nothing known').to.equal(undefined);
    expect(await priceOf(settings, 'openai', 'no-such-model-anywhere')).to.equal(undefined);
    // The table is in USD: with another currency, only prices set by hand count.
    const euro = config({ models: { currency: 'EUR', providers: { openai: { kind: 'openai-compatible', baseUrl: 'https://api.openai.com/v1', prices: { x: { input: 1, output: 2 } } } } } });
    expect(await priceOf(euro, 'openai', 'gpt-4o')).to.equal(undefined);
    expect(await priceOf(euro, 'openai', 'x')).to.deep.include({ currency: 'EUR' });
  });

  it('a call\'s cost in millionths: cached input at its own price, unknown usage or price unknown, never 0', () => {
    const price = { input: 2, output: 10, cachedInput: 0.5, currency: 'USD', source: 'configured' as const };
    expect(costOf(price, { inputTokens: 1000, outputTokens: 100 })).to.equal(3000);
    expect(costOf(price, { inputTokens: 1000, outputTokens: 100, cachedInputTokens: 800 })).to.equal(200 * 2 + 800 * 0.5 + 1000);
    expect(costOf({ ...price, cachedInput: undefined }, { inputTokens: 10, cachedInputTokens: 10 })).to.equal(20);
    expect(costOf(price, {})).to.equal(undefined);
    expect(costOf(undefined, { inputTokens: 5 })).to.equal(undefined);
  });

  it('periods are UTC days and calendar months', () => {
    const now = Date.parse('2026-11-28T23:59:59Z');
    expect(periodOf('daily', now)).to.deep.equal({ start: Date.parse('2026-11-28T00:00:00Z'), end: Date.parse('2026-11-29T00:00:00Z') });
    expect(periodOf('monthly', now)).to.deep.equal({ start: Date.parse('2026-11-01T00:00:00Z'), end: Date.parse('2026-12-01T00:00:00Z') });
    expect(periodOf('monthly', Date.parse('2026-12-31T12:00:00Z')).end).to.equal(Date.parse('2027-01-01T00:00:00Z'));
  });

  describe('budgets over the log of model calls', () => {
    const store = freshStore();
    const now = Date.parse('2026-11-28T12:00:00Z');
    let usage: UsageLog;
    let notices: BudgetNotice[];
    let settings: GatewayConfig;
    let budgets: Budgets;
    const spend = async (micros: number, who: Partial<ModelCall>, at = now) => {
      usage.record({ at, provider: 'p', model: 'm', surface: 'chat', latencyMs: 1, outcome: 'ok', inputTokens: 1, costMicros: micros, currency: 'EUR', ...who }, (error) => {
        throw error;
      });
    };
    beforeEach(() => {
      usage = new UsageLog(store());
      notices = [];
      settings = config({
        models: { currency: 'EUR' },
        agents: { helper: { model: 'p/m', budget: { daily: 1, monthly: 5 } }, free: { model: 'p/m' } },
        automations: { digest: { trigger: { every: '1h' }, action: { agent: 'free', prompt: 'x' }, budget: { monthly: 0.5 } } },
      });
      budgets = new Budgets({ config: () => settings, usage, store: store(), notify: (notice) => notices.push(notice) });
    });

    it('admits calls under the cap, refuses at it (429 until the period ends) and counts only this period and currency', async () => {
      await spend(600_000, { agent: 'helper' });
      await spend(500_000, { agent: 'helper' }, Date.parse('2026-11-27T12:00:00Z'));
      await spend(9_000_000, { agent: 'helper', currency: 'USD' });
      await budgets.admit({ agent: 'helper', surface: 'chat' }, now);
      await spend(400_000, { agent: 'helper' });
      const refused = await budgets.admit({ agent: 'helper', surface: 'chat' }, now).catch((error: DomainError) => error) as DomainError;
      expect(refused).to.be.instanceOf(DomainError);
      expect(refused.kind).to.equal('rate_limited');
      expect(refused.reason).to.equal('budget_exceeded');
      expect(refused.message).to.equal('Agent helper has spent its daily budget (1.00 EUR of 1.00 EUR); it runs again after 2026-11-29T00:00:00.000Z (agents.helper.budget).');
      expect(refused.headers['retry-after']).to.equal(String(12 * 3600));
      // An agent without a cap, and a call of no agent, are never refused.
      await spend(99_000_000, { agent: 'free' });
      await budgets.admit({ agent: 'free', surface: 'chat' }, now);
      await budgets.admit({ surface: 'api', subject: 'gateway' }, now);
    });

    it('the monthly cap holds across days, and an automation\'s cap holds for its runs whatever agent they use', async () => {
      for (const day of ['2026-11-02', '2026-11-10', '2026-11-20', '2026-11-25', '2026-11-26']) await spend(1_000_000, { agent: 'helper' }, Date.parse(`${day}T08:00:00Z`));
      const monthly = await budgets.admit({ agent: 'helper', surface: 'chat' }, now).catch((error: DomainError) => error) as DomainError;
      expect(monthly.message).to.include('has spent its monthly budget (5.00 EUR of 5.00 EUR); it runs again after 2026-12-01T00:00:00.000Z');
      await spend(500_000, { agent: 'free', automation: 'digest', subject: 'automation:digest' });
      const automation = await budgets.admit({ agent: 'free', subject: 'automation:digest', surface: 'automation' }, now).catch((error: DomainError) => error) as DomainError;
      expect(automation.message).to.include('Automation digest has spent its monthly budget (0.50 EUR of 0.50 EUR)');
    });

    it('an agent\'s cap counts what runs it delegated spent, however deep the chain, and no agent whose id only looks like one in it', async () => {
      settings = config({ models: { currency: 'EUR' }, agents: { top_a: { model: 'p/m', budget: { daily: 1 } }, topxa: { model: 'p/m', budget: { daily: 1 } }, mid: { model: 'p/m' }, leaf: { model: 'p/m' } } });
      budgets = new Budgets({ config: () => settings, usage, store: store(), notify: (notice) => notices.push(notice) });
      // Two levels down: the leaf's call, delegated by mid, in a chain top_a started.
      await spend(1_000_000, { agent: 'leaf', delegatedBy: 'mid', delegators: ['top_a', 'mid'] });
      const refused = await budgets.admit({ agent: 'top_a', surface: 'chat' }, now).catch((error: DomainError) => error) as DomainError;
      expect(refused.message).to.include('Agent top_a has spent its daily budget (1.00 EUR of 1.00 EUR)');
      // A run further down the same chain is refused by the first agent's cap, before its model is called.
      const below = await budgets.admit({ agent: 'leaf', delegatedBy: 'mid', delegators: ['top_a', 'mid'], surface: 'delegate' }, now).catch((error: DomainError) => error) as DomainError;
      expect(below.message).to.include('Agent top_a has spent its daily budget');
      // "_" is no wildcard: topxa spent nothing.
      await budgets.admit({ agent: 'topxa', surface: 'chat' }, now);
    });

    it('tells the 80 % warning and the cap reached once each per period, however often it is asked', async () => {
      await spend(500_000, { agent: 'helper' });
      await budgets.spent({ agent: 'helper', surface: 'chat' }, now);
      expect(notices).to.deep.equal([]);
      await spend(350_000, { agent: 'helper' });
      await budgets.spent({ agent: 'helper', surface: 'chat' }, now);
      await budgets.spent({ agent: 'helper', surface: 'chat' }, now);
      expect(notices.map((notice) => [notice.level, notice.period, notice.spent])).to.deep.equal([['warning', 'daily', 850_000]]);
      await spend(200_000, { agent: 'helper' });
      await budgets.spent({ agent: 'helper', surface: 'chat' }, now);
      await budgets.admit({ agent: 'helper', surface: 'chat' }, now).catch(() => undefined);
      expect(notices.map((notice) => notice.level)).to.deep.equal(['warning', 'reached']);
      // A second daemon on the same store tells nothing again.
      const other: BudgetNotice[] = [];
      const second = new Budgets({ config: () => settings, usage, store: store(), notify: (notice) => other.push(notice) });
      await second.spent({ agent: 'helper', surface: 'chat' }, now);
      expect(other).to.deep.equal([]);
      // The next day is a new period.
      await spend(900_000, { agent: 'helper' }, now + 86_400_000);
      await budgets.spent({ agent: 'helper', surface: 'chat' }, now + 86_400_000);
      expect(notices.map((notice) => notice.level)).to.deep.equal(['warning', 'reached', 'warning']);
    });

    it('sums cost by agent, automation, channel and person in the summary, in its currency, unpriced calls counted apart', async () => {
      await spend(250_000, { agent: 'helper', channel: 'telegram', person: 'peer:telegram:default:1001' });
      await spend(750_000, { agent: 'free', automation: 'digest', person: 'automation:digest' });
      usage.record({ at: now, provider: 'p', model: 'local', surface: 'chat', latencyMs: 1, outcome: 'ok', inputTokens: 10 }, () => undefined);
      const summary = await usage.summary(now - 1000, 'EUR');
      expect(summary.currency).to.equal('EUR');
      expect(summary.total).to.include({ calls: 3, cost: 1, unpriced: 1 });
      expect(summary.byAgent.find((group) => group.key === 'helper')).to.include({ cost: 0.25 });
      expect(summary.byAutomation).to.deep.equal([{ ...summary.byAutomation[0]!, key: 'digest', cost: 0.75 }]);
      expect(summary.byChannel.map((group) => [group.key, group.cost])).to.deep.equal([['telegram', 0.25]]);
      expect(summary.byPerson.map((group) => group.key).sort()).to.deep.equal(['automation:digest', 'peer:telegram:default:1001']);
    });
  });
});
