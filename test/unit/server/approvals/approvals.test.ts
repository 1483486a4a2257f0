import { expect } from 'chai';
import { pino } from 'pino';
import { ExecApprovals, answerText } from '../../../../src/server/approvals/approvals.ts';
import { ChatAnswers } from '../../../../src/server/approvals/chat-answers.ts';
import { OperatorNotices, codeSpan } from '../../../../src/server/approvals/notices.ts';
import { answerOf, Questions } from '../../../../src/server/approvals/questions.ts';
import { Outbox } from '../../../../src/server/channels/outbox/outbox.ts';
import type { AccountStatus, Channel, InboundMessage, SendOptions, SendReceipt } from '../../../../src/server/kernel/channel.ts';
import { RunSuspended } from '../../../../src/server/kernel/errors.ts';
import type { ToolContext } from '../../../../src/server/kernel/module.ts';
import type { NewJob } from '../../../../src/server/jobs/module.ts';
import { SessionStore, type NewEntry } from '../../../../src/server/sessions/session-store.ts';
import type { Db, Store } from '../../../../src/server/store/database.ts';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';
import type { GatewayConfig } from '../../../../src/shared/config/types.ts';
import { freshStore } from '../../../support/store.ts';

/** A platform in memory that answers every send with a message id, keeping what it was asked. */
class RecordingChannel implements Channel {
  readonly tries: { to: string; text: string; options: SendOptions }[] = [];
  private counter = 0;
  readonly id: string;
  readonly buttons: boolean;
  readonly edits = true;
  constructor(id: string, buttons: boolean) {
    this.id = id;
    this.buttons = buttons;
  }
  accounts() { return ['default']; }
  async start() {}
  async stop() {}
  status(): AccountStatus[] { return []; }
  async send(_account: string, to: string, text: string, options: SendOptions = {}): Promise<SendReceipt> {
    this.tries.push({ to, text, options });
    return { ids: [options.editOf ?? `${this.id}-${++this.counter}`] };
  }
  normalizePeer(peer: string) { return peer.toLowerCase(); }
  isRoom() { return false; }
  checkPeer() { return undefined; }
}

const silent = pino({ level: 'silent' });

for (const engine of ['sqlite', 'postgres'] as const) describe(`approvals in the store, told to the chats (${engine})`, () => {
  const current = freshStore(engine);
  let store: Store;
  let config: GatewayConfig;
  let outbox: Outbox;
  let telegram: RecordingChannel;
  let irc: RecordingChannel;
  let notices: OperatorNotices;
  let told: { event: string; status: string }[];
  const approvalsOn = (daemon: string, options: { now?: () => number } = {}) => new ExecApprovals({
    store, daemon, notices, logger: silent, tell: (event, view) => told.push({ event, status: view.status }), ...options,
  });
  const request = (command: string, timeoutMs = 60_000) => ({ command, caller: 'agent:ops', agent: 'ops', sessionKey: 'telegram:default:dm:1001', why: 'every command asks (approval ask)', timeoutMs });
  const waitingOne = async (approvals: ExecApprovals) => {
    for (let tries = 0; tries < 200; tries++) {
      const [first] = await approvals.list();
      if (first) return first;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error('no request waits');
  };

  beforeEach(() => {
    store = current();
    config = effectiveConfig({
      approvals: { notify: [{ channel: 'telegram', to: '-100200' }, { channel: 'irc', to: 'Alice' }], approvers: ['telegram:1001', 'irc:Alice'] },
    });
    outbox = new Outbox({ store, logger: silent });
    telegram = new RecordingChannel('telegram', true);
    irc = new RecordingChannel('irc', false);
    outbox.attach(telegram);
    outbox.attach(irc);
    notices = new OperatorNotices({
      config: () => config, outbox, logger: silent,
      channels: { normalizePeer: (channel, peer) => (channel === 'irc' ? peer.toLowerCase() : peer.trim()), hasButtons: (channel) => channel === 'telegram', editsButtons: (channel) => channel === 'telegram' },
    });
    told = [];
  });
  afterEach(() => outbox.stop());

  it('tells each chat of a request, with buttons where the platform has them and how to answer in words everywhere', async () => {
    const approvals = approvalsOn('d1');
    const waiting = approvals.ask(request('ls -la'));
    const view = await waitingOne(approvals);
    expect(view.id).to.match(/^ap_[0-9a-f]{12}$/);
    expect(view.code).to.equal(view.id.slice(3, 7));
    await outbox.idle();
    expect(telegram.tries[0]!.to).to.equal('-100200');
    expect(telegram.tries[0]!.text).to.include(`Approval ${view.code}: Agent ops wants to run \`ls -la\``).and.include('with the buttons');
    expect(telegram.tries[0]!.options.buttons).to.deep.equal([{ label: 'Approve', data: `ap:y:${view.id}` }, { label: 'Reject', data: `ap:n:${view.id}` }]);
    expect(irc.tries[0]!.text).to.include(`Reply "approve ${view.code}" or "reject ${view.code}".`).and.not.include('buttons');
    expect(told).to.deep.equal([{ event: 'requested', status: 'pending' }]);
    await approvals.decide(view.code, false, { by: 'device:abc', via: 'cli' });
    expect(await waiting).to.deep.include({ decision: 'rejected', id: view.id, by: 'device:abc' });
  });

  it('the first of two answers at once wins; the other is late, and told who decided; the message with buttons is edited, the others followed', async () => {
    const approvals = approvalsOn('d1');
    const waiting = approvals.ask(request('make deploy'));
    const view = await waitingOne(approvals);
    await outbox.idle();
    const [one, two] = await Promise.all([
      approvals.decide(view.id, true, { by: 'telegram:1001', via: 'telegram' }),
      approvals.decide(view.code, false, { by: 'device:abc', via: 'cli' }),
    ]);
    const outcomes = [one, two].map((decided) => decided.outcome).sort();
    expect(outcomes).to.deep.equal(['decided', 'late']);
    const winner = [one, two].find((decided) => decided.outcome === 'decided')!;
    const loser = [one, two].find((decided) => decided.outcome === 'late')!;
    const outcome = await waiting;
    expect(outcome.decision).to.equal(winner.outcome === 'decided' ? winner.view.status : 'none');
    expect(answerText(loser)).to.match(new RegExp(`^Approval ${view.code} was already (approved|rejected) by (telegram:1001|device:abc) \\((telegram|cli)\\); your answer changes nothing\\.$`));
    const audited = await store.all<{ kind: string; actor: string }>("SELECT kind, actor FROM audit_events WHERE subject = ? AND kind IN ('exec.approved', 'exec.rejected')", view.id);
    expect(audited).to.have.length(1);

    await outbox.idle();
    const edit = telegram.tries.at(-1)!;
    expect(edit.options.editOf, 'the request\'s own message').to.equal(telegram.tries[0]!.options.editOf ?? 'telegram-1');
    expect(edit.options.buttons, 'its buttons taken away').to.deep.equal([]);
    expect(edit.text).to.match(new RegExp(`^Approval ${view.code}: (approved|rejected) by `));
    expect(irc.tries.at(-1)!.options.editOf, 'a channel without buttons gets a new message').to.equal(undefined);
    expect(irc.tries.at(-1)!.text).to.equal(telegram.tries.at(-1)!.text);
  });

  it('names requests by their short code (ambiguous when two waiting share it), and ends unanswered ones: in time, and those a stopped daemon left', async () => {
    let now = Date.now();
    const approvals = approvalsOn('d1', { now: () => now });
    const waiting = approvals.ask(request('sleep 1', 40));
    const view = await waitingOne(approvals);
    // Another request under the same code (made by hand: the daemon never gives one out while another waits).
    await store.run(`INSERT INTO exec_approvals (id, code, command, caller, why, requested_at, expires_at, status, daemon) VALUES (?, ?, 'x', 'c', 'w', ?, ?, 'pending', 'gone')`,
      `ap_${view.code}00000000`, view.code, now, now + 60_000);
    const ambiguous = await approvals.decide(view.code, true, { by: 'device:abc', via: 'cli' });
    expect(ambiguous.outcome).to.equal('ambiguous');
    expect((await waiting).decision).to.equal('expired');
    const late = await approvals.decide(view.id, true, { by: 'device:abc', via: 'cli' });
    expect(late.outcome).to.equal('late');
    expect(answerText(late)).to.match(/nobody answered in time/);
    expect(await store.get("SELECT 1 AS found FROM audit_events WHERE kind = 'exec.expired' AND subject = ?", view.id)).to.not.equal(undefined);
    expect((await approvals.decide('beef', true, { by: 'device:abc', via: 'cli' })).outcome).to.equal('unknown');

    // The hand-made one belongs to a daemon that is gone: it ends at the next start.
    now += 1;
    const next = approvalsOn('d2', { now: () => now });
    expect(await next.interruptLeftovers()).to.equal(1);
    expect((await store.get<{ status: string; decided_via: string }>('SELECT status, decided_via FROM exec_approvals WHERE id = ?', `ap_${view.code}00000000`))).to.deep.include({ status: 'expired', decided_via: 'the daemon stopped while it waited' });
  });

  it('an approver\'s words decide, and are taken; a stranger\'s words naming a request are refused and told; other words pass', async () => {
    const approvals = approvalsOn('d1');
    const waiting = approvals.ask(request('uptime'));
    const view = await waitingOne(approvals);
    const questions = { claim: async () => false, press: async () => undefined } as unknown as Questions;
    const answers = new ChatAnswers({ store, approvals, questions, notices, outbox });
    const said = (sender: string, text: string): InboundMessage => ({ account: 'default', sender, senderName: sender, kind: 'direct', text, at: Date.now(), platformId: `${sender}-${text}` });
    const claim = (message: InboundMessage) => store.transaction((tx) => answers.claim('irc', message, { kind: 'direct', peer: message.sender }, tx));
    expect(await claim(said('bob', 'approve of this?'))).to.equal(false);
    expect(await claim(said('bob', 'approve ffff'))).to.equal(false);
    expect(await claim(said('bob', `approve ${view.code}`))).to.equal(true);
    expect(await store.get("SELECT 1 AS found FROM audit_events WHERE kind = 'exec.approval.refused' AND actor = 'irc:bob'")).to.not.equal(undefined);
    expect((await approvals.list()).map((waitingView) => waitingView.id)).to.deep.equal([view.id]);
    expect(await claim(said('alice', `  APPROVE ${view.code}.`))).to.equal(true);
    expect((await waiting).decision).to.equal('approved');
    await outbox.idle();
    expect(irc.tries.map((sent) => [sent.to, sent.text.split(':')[0]])).to.deep.include.members([['bob', 'bob'], ['Alice', `Approval ${view.code}`]]);
    // A press from someone who is not an approver changes nothing.
    expect((await answers.press('telegram', { account: 'default', sender: '2002', senderName: 'x', data: `ap:y:${view.id}` }))!.text).to.match(/not one of this gateway's approvers/);
  });
});

for (const engine of ['sqlite', 'postgres'] as const) describe(`ask: a question in the store, answered once (${engine})`, () => {
  const current = freshStore(engine);
  let store: Store;
  let sessions: SessionStore;
  let outbox: Outbox;
  let telegram: RecordingChannel;
  let jobs: { kind: string; payload: unknown; runAt?: number }[];
  let resumed: { id: string; sender: string; to: string }[];
  let questions: Questions;
  let config: GatewayConfig;
  const person = 'peer:telegram:default:1001';
  const key = 'telegram:default:dm:1001';
  const context = (over: Partial<ToolContext> = {}): ToolContext => ({
    caller: 'agent:helper', surface: 'agent', agent: 'helper', person, sessionKey: key, runId: 'run_1', callId: 'call_1', replyTo: '1001', logger: silent, ...over,
  });
  const asked = async (args: Record<string, unknown>, over: Partial<ToolContext> = {}) => {
    try {
      await questions.tool().handler(args, context(over));
    } catch (error) {
      if (error instanceof RunSuspended) return error.result as { question: string };
      throw error;
    }
    throw new Error('the run did not wait');
  };

  beforeEach(async () => {
    store = current();
    sessions = new SessionStore(store);
    await sessions.record({ channel: 'telegram', account: 'default', kind: 'direct', peer: '1001', direction: 'in', sender: '1001', text: 'deploy?', at: Date.now() });
    outbox = new Outbox({ store, logger: silent });
    telegram = new RecordingChannel('telegram', true);
    outbox.attach(telegram);
    jobs = [];
    resumed = [];
    config = effectiveConfig({ channels: { telegram: { enabled: true } }, tools: { ask: { timeoutSeconds: 60 } } });
    questions = new Questions({
      store, config: () => config, outbox, logger: silent,
      sessions: { store: sessions, append: (sessionKey: string, entry: NewEntry, db?: Db) => sessions.append(sessionKey, entry, db) },
      channels: { hasButtons: (channel) => channel === 'telegram', editsButtons: (channel) => channel === 'telegram' },
      jobs: { enqueue: async (job: NewJob) => { jobs.push(job as never); return 'job'; } },
      resume: async (question) => { resumed.push(question); },
    });
  });
  afterEach(() => outbox.stop());

  it('reads an answer: an option by its number or words, else the words', () => {
    expect(answerOf(' 2 ', ['yes', 'no'])).to.deep.equal({ answer: 'no', option: 2 });
    expect(answerOf('2.', ['yes', 'no'])).to.deep.equal({ answer: 'no', option: 2 });
    expect(answerOf('YES', ['yes', 'no'])).to.deep.equal({ answer: 'yes', option: 1 });
    expect(answerOf('3', ['yes', 'no'])).to.deep.equal({ answer: '3' });
    expect(answerOf('maybe later', [])).to.deep.equal({ answer: 'maybe later' });
    expect(codeSpan('a`b')).to.equal('`` a`b ``');
  });

  it('asks with buttons and ends the run; only the person asked answers, once; the answer is the call\'s result in the session; the run resumes once', async () => {
    const { question } = await asked({ question: 'Deploy now?', options: ['Yes', 'No'], default: 'No' });
    expect(question).to.match(/^q_[0-9a-f]{12}$/);
    await outbox.idle();
    expect(telegram.tries[0]).to.deep.include({ to: '1001' });
    expect(telegram.tries[0]!.text).to.match(/^Deploy now\?\n\(If I hear nothing by \d\d:\d\d UTC, I will go with: No\.\)$/);
    expect(telegram.tries[0]!.options.buttons).to.deep.equal([{ label: 'Yes', data: `q:${question}:1` }, { label: 'No', data: `q:${question}:2` }]);
    expect(jobs).to.have.length(1);
    expect(jobs[0]).to.deep.include({ kind: 'ask.timeout', payload: { id: question } });

    expect((await questions.press('telegram', { account: 'default', sender: '2002', senderName: 'x', data: `q:${question}:1` }))!.text).to.equal('This question is for someone else.');
    expect((await questions.press('telegram', { account: 'default', sender: '1001', senderName: 'Dan', data: `q:${question}:1` }))!.text).to.equal('Got it: Yes');
    expect((await questions.press('telegram', { account: 'default', sender: '1001', senderName: 'Dan', data: `q:${question}:2` }))!.text).to.equal('Already answered: Yes');
    expect(await questions.timeout({ id: question })).to.deep.include({ already: 'answered' });
    expect(resumed).to.deep.equal([{ id: question, agent: 'helper', sessionKey: key, channel: 'telegram', account: 'default', to: '1001', sender: '1001' }]);
    const history = await sessions.history(key, { limit: 10 });
    const result = history.find((message) => message.kind === 'tool_result')!;
    expect(result.data).to.deep.equal({ id: 'call_1', name: 'ask', result: { answer: 'Yes', option: 1, answeredBy: 'telegram:1001' } });
    expect(result.runId).to.equal('run_1');
    await outbox.idle();
    expect(telegram.tries.at(-1)!.options).to.deep.include({ editOf: 'telegram-1', buttons: [] });
    expect(telegram.tries.at(-1)!.text).to.equal('Deploy now?\n(Answered: Yes)');
  });

  it('takes the person\'s next words in the conversation as the answer; with none in time, the stated default; anywhere else it refuses', async () => {
    const { question } = await asked({ question: 'Which one?', options: ['red', 'green'] });
    const claim = (sender: string, text: string, peer = '1001') => store.transaction((tx) => questions.claim('telegram', { account: 'default', sender, text }, { kind: 'direct', peer }, tx));
    expect(await claim('2002', '2', '2002'), 'someone else\'s conversation').to.equal(false);
    expect(await claim('1001', 'green')).to.equal(true);
    expect(await claim('1001', 'and another thing'), 'answered already: a turn again').to.equal(false);
    const row = await store.get<{ status: string; answer: string }>('SELECT status, answer FROM agent_questions WHERE id = ?', question);
    expect(row).to.deep.include({ status: 'answered', answer: 'green' });

    const second = await asked({ question: 'Keep it?', default: 'keep' }, { callId: 'call_2' });
    expect(await questions.timeout({ id: second.question })).to.deep.include({ timedOut: true });
    const result = (await sessions.history(key, { limit: 20 })).filter((message) => message.kind === 'tool_result').at(-1)!;
    expect(result.data).to.deep.include({ id: 'call_2' });
    expect((result.data!.result as { answer: string; timedOut: boolean })).to.deep.include({ answer: 'keep', timedOut: true });
    expect(resumed).to.have.length(2);

    const refused = await Promise.resolve(questions.tool().handler({ question: 'x' }, context({ surface: 'http' }))).then(() => undefined, (error: Error) => error);
    expect(refused?.message).to.match(/^The ask tool is for an agent's run/);
    const elsewhere = await Promise.resolve(questions.tool().handler({ question: 'x' }, context({ person: 'operator' }))).then(() => undefined, (error: Error) => error);
    expect(elsewhere?.message).to.match(/^The ask tool reaches people on channels only/);
  });
});
