import { expect } from 'chai';
import { Cron } from 'croner';
import { automationProblems, describeTrigger, everyMs, missingFields, Schedule } from '../../../src/shared/automations.ts';
import { effectiveConfig } from '../../../src/shared/config/keys.ts';

const at = (text: string) => Date.parse(text);
const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

describe('automations: schedules and checks', () => {
  describe('cron in a time zone', () => {
    it('fires at 9:00 Berlin time on weekdays, in winter (UTC+1) and in summer (UTC+2)', () => {
      const weekdays = new Schedule({ cron: '0 9 * * 1-5', tz: 'Europe/Berlin' });
      // Friday 27 March 2026 after nine: next Monday, after the clocks went forward on Sunday.
      expect(iso(weekdays.next(at('2026-03-27T12:00:00Z')))).to.equal('2026-03-30T07:00:00.000Z');
      expect(iso(weekdays.next(at('2026-01-05T07:59:59Z')))).to.equal('2026-01-05T08:00:00.000Z');
      // Saturday: Monday.
      expect(iso(weekdays.next(at('2026-11-28T10:00:00Z')))).to.equal('2026-11-30T08:00:00.000Z');
    });

    it('a time the spring change skips fires once, right after the gap; one the autumn change repeats fires once', () => {
      const night = new Schedule({ cron: '30 2 * * *', tz: 'Europe/Berlin' });
      // 29 March 2026: 02:00 CET becomes 03:00 CEST; 02:30 does not exist.
      const spring = [at('2026-03-28T00:00:00Z')];
      for (let i = 0; i < 3; i++) spring.push(night.next(spring.at(-1)!)!);
      expect(spring.slice(1).map(iso)).to.deep.equal(['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z']);
      // 25 October 2026: 03:00 CEST becomes 02:00 CET; 02:30 happens twice, the automation fires at the first.
      const autumn = [at('2026-10-24T00:00:00Z')];
      for (let i = 0; i < 3; i++) autumn.push(night.next(autumn.at(-1)!)!);
      expect(autumn.slice(1).map(iso)).to.deep.equal(['2026-10-24T00:30:00.000Z', '2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z']);
    });

    it('agrees with croner itself, and reads a cron without a zone in UTC, not the host\'s zone', () => {
      const expression = '15 */3 * * 0,6';
      const ours = new Schedule({ cron: expression, tz: 'America/New_York' });
      const theirs = new Cron(expression, { timezone: 'America/New_York', paused: true });
      let from = at('2026-02-27T00:00:00Z');
      for (let i = 0; i < 20; i++) {
        const next = ours.next(from)!;
        expect(next).to.equal(theirs.nextRun(new Date(from))!.getTime());
        from = next;
      }
      expect(iso(new Schedule({ cron: '0 12 * * *' }).next(at('2026-06-01T00:00:00Z')))).to.equal('2026-06-01T12:00:00.000Z');
      expect(iso(new Schedule({ cron: '*/5 * * * * *' }).next(at('2026-06-01T00:00:07.100Z')))).to.equal('2026-06-01T00:00:10.000Z');
    });

    it('finds the latest firings missed in a span, oldest first, bounded', () => {
      const hourly = new Schedule({ cron: '0 * * * *', tz: 'Asia/Kolkata' });
      // Kolkata is UTC+5:30: its whole hours are at :30 UTC.
      expect(hourly.latest(at('2026-05-01T00:00:00Z'), at('2026-05-01T03:00:00Z'), 100).map(iso)).to.deep.equal([
        '2026-05-01T00:30:00.000Z', '2026-05-01T01:30:00.000Z', '2026-05-01T02:30:00.000Z',
      ]);
      expect(hourly.latest(at('2026-05-01T00:00:00Z'), at('2026-05-01T03:00:00Z'), 1).map(iso)).to.deep.equal(['2026-05-01T02:30:00.000Z']);
      expect(hourly.latest(at('2026-05-01T00:30:00Z'), at('2026-05-01T01:30:00Z'), 5).map(iso), 'the span excludes its start, includes its end').to.deep.equal(['2026-05-01T01:30:00.000Z']);
    });
  });

  it('every: multiples of the interval from 1970 UTC, the same on every daemon', () => {
    expect(everyMs('30s')).to.equal(30_000);
    expect(everyMs('15m')).to.equal(900_000);
    expect(everyMs('2h')).to.equal(7_200_000);
    expect(everyMs('1d')).to.equal(86_400_000);
    expect(everyMs('367d')).to.equal(undefined);
    expect(everyMs('0s')).to.equal(undefined);
    expect(everyMs('1.5h')).to.equal(undefined);
    const quarter = new Schedule({ every: '15m' });
    expect(iso(quarter.next(at('2026-11-27T10:07:12Z')))).to.equal('2026-11-27T10:15:00.000Z');
    expect(iso(quarter.next(at('2026-11-27T10:15:00Z'))), 'strictly after').to.equal('2026-11-27T10:30:00.000Z');
    expect(quarter.latest(at('2026-11-27T10:00:00Z'), at('2026-11-27T11:00:00Z'), 2).map(iso)).to.deep.equal(['2026-11-27T10:45:00.000Z', '2026-11-27T11:00:00.000Z']);
  });

  it('at: once, and never again', () => {
    const once = new Schedule({ at: '2026-12-24T18:00:00+01:00' });
    expect(iso(once.next(at('2026-12-01T00:00:00Z')))).to.equal('2026-12-24T17:00:00.000Z');
    expect(once.next(at('2026-12-24T17:00:00Z'))).to.equal(undefined);
    expect(once.latest(at('2026-12-24T00:00:00Z'), at('2026-12-25T00:00:00Z'), 100)).to.have.length(1);
  });

  it('templates may name only what the trigger\'s payload holds', () => {
    expect(missingFields('At {{scheduledFor}} for {{automation}}', { every: '1h' })).to.deep.equal([]);
    expect(missingFields('{{ payload.x }}', { every: '1h' })).to.deep.equal(['payload.x']);
    expect(missingFields('{{repository}} {{ref}} {{payload.head_commit.message}} {{payload.sender.login}}', { webhook: { event: 'push' } })).to.deep.equal([]);
    expect(missingFields('{{payload.pull_request.title}}', { webhook: { event: 'push' } })).to.deep.equal(['payload.pull_request.title']);
    // An event whose fields the gateway does not list: anything under payload.
    expect(missingFields('{{payload.anything}}', { webhook: { event: 'deployment' } })).to.deep.equal([]);
    expect(missingFields('{{hook}} {{payload.version}}', { hook: 'deployed' })).to.deep.equal([]);
  });

  it('says what is wrong with each automation, by key', () => {
    const config = effectiveConfig({
      agents: { ops: { model: 'p/m' } },
      channels: { irc: { host: 'irc.example.com', nick: 'gw' } },
      automations: {
        good: { trigger: { cron: '0 9 * * 1-5', tz: 'Europe/Berlin' }, action: { agent: 'ops', prompt: 'Morning {{scheduledFor}}', deliver: { channel: 'irc', to: '#ops' } } },
        message: { trigger: { every: '1h' }, action: { message: { channel: 'irc', to: 'alice', text: 'hourly' } } },
        past: { trigger: { at: '2001-01-01T00:00:00Z' }, action: { agent: 'ops', prompt: 'x' } },
        never: { trigger: { cron: '0 0 30 2 *' }, action: { agent: 'ops', prompt: 'x' } },
        both: { trigger: { every: '1h' }, action: { agent: 'ops', prompt: 'x', message: { channel: 'irc', to: 'a', text: 'b' } } },
        session: { trigger: { every: '1h' }, action: { agent: 'ops', prompt: 'x', session: 'not a key', deliver: 'session' } },
        tz: { trigger: { every: '1h', tz: 'Europe/Berlin' }, action: { agent: 'ops', prompt: 'x' } },
      },
    });
    const problems = automationProblems(config, at('2026-11-27T00:00:00Z'));
    expect(problems.filter((problem) => problem.startsWith('automations.good') || problem.startsWith('automations.message:') || problem.startsWith('automations.message.'))).to.deep.equal([]);
    expect(problems).to.include('automations.past.trigger.at: 2001-01-01T00:00:00Z is in the past');
    expect(problems).to.include('automations.never.trigger.cron: "0 0 30 2 *" never fires');
    expect(problems).to.include('automations.both.action: name either an agent (with a prompt) or a message');
    expect(problems.some((problem) => problem.startsWith('automations.session.action.session:'))).to.equal(true);
    expect(problems).to.include('automations.tz.trigger.tz: a time zone goes with a cron expression');
    expect(describeTrigger({ webhook: { event: 'pull_request', action: 'opened', repository: 'org/repo' } })).to.equal('webhook pull_request.opened org/repo');
  });
});
