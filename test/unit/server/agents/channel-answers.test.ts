import { expect } from 'chai';
import pino from 'pino';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';
import type { GatewayConfig } from '../../../../src/shared/config/types.ts';
import type { AgentRunRequest } from '../../../../src/server/agents/agent-runner.ts';
import { addressedTo, type AnswerJob, CHANNEL_ANSWER_JOB, ChannelAnswers } from '../../../../src/server/agents/channel-answers.ts';
import type { RunOutcome } from '../../../../src/server/agents/runtime.ts';
import type { Inbound, OutboxItem, ReplyStream } from '../../../../src/server/channels/module.ts';
import type { NewJob } from '../../../../src/server/jobs/job-queue.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import type { Tx } from '../../../../src/server/store/database.ts';

const TX = { tx: true } as unknown as Tx;

/** A message as a channel's inbox hands it on, recorded in its session, with the agent it chose (irc's helper; quiet has none). */
const inbound = (text: string, more: Partial<Inbound['message']> = {}, channel = 'irc'): Inbound => ({
  channel, ...(channel === 'irc' ? { agent: 'helper' } : {}),
  message: { account: 'main', sender: 'ann', senderName: 'Ann', kind: 'direct', text, at: 0, ...more } as Inbound['message'],
  session: { key: `${channel}:main:dm:ann` } as Inbound['session'],
  recorded: { id: 7 } as Inbound['recorded'],
});

describe('agents: answers on channels', () => {
  let config: GatewayConfig;
  let now: number;
  let queued: { job: NewJob; tx: unknown }[];
  let replies: { item: OutboxItem; tx: unknown }[];
  let typing: string[];
  let runs: AgentRunRequest[];
  let answer: () => Promise<Partial<RunOutcome>>;
  let answeredBefore: boolean;
  let stream: { pushed: string[]; finished: number } | undefined;
  let answers: ChannelAnswers;

  beforeEach(() => {
    config = effectiveConfig({ channels: { irc: { host: '127.0.0.1', port: 6667, nick: 'gw', agent: 'helper' }, quiet: { host: '127.0.0.1', port: 6667, nick: 'gw' } }, runtime: { senderLimit: { max: 2, windowMs: 600_000 } } });
    now = 1_000_000;
    queued = [];
    replies = [];
    typing = [];
    runs = [];
    answer = async () => ({ runId: 'run_1', status: 'succeeded', text: 'Hello Ann.' });
    answeredBefore = false;
    stream = undefined;
    answers = new ChannelAnswers({
      config: () => config, now: () => now, log: pino({ level: 'silent' }), typingEveryMs: 5,
      jobs: { enqueue: async (job: NewJob, tx?: unknown) => { queued.push({ job, tx }); return `job_${queued.length}`; } },
      channels: {
        selfName: (channel) => (channel === 'irc' ? 'g.w' : undefined),
        reply: async (item, tx) => { replies.push({ item, tx }); return true; },
        answered: async () => answeredBefore,
        typing: async (channel, account, to) => void typing.push(`${channel}:${account}:${to}`),
        stream: () => stream && ({ push: (delta: string) => void stream!.pushed.push(delta), finish: async () => { stream!.finished++; return 'msg-9'; } } as unknown as ReplyStream),
      },
      run: async (request) => {
        runs.push(request);
        return answer() as Promise<RunOutcome>;
      },
    });
  });

  const job = (over: Partial<AnswerJob> = {}): AnswerJob => ({ channel: 'irc', account: 'main', agentId: 'helper', sessionKey: 'irc:main:dm:ann', recordedId: 7, text: 'hi', to: 'Ann', sender: { id: 'ann', name: 'Ann' }, ...over });

  it('queues an answer to a direct message, in the transaction that records it', async () => {
    await answers.inbound(inbound('hello'), TX);
    expect(queued).to.deep.equal([{
      tx: TX,
      job: { kind: CHANNEL_ANSWER_JOB, source: 'channel:irc', maxAttempts: 5, payload: { channel: 'irc', account: 'main', agentId: 'helper', sessionKey: 'irc:main:dm:ann', recordedId: 7, to: 'Ann', text: 'hello', sender: { id: 'ann', name: 'Ann' } } },
    }]);
    // Where the channel says a reply goes wins over the sender's name.
    await answers.inbound(inbound('again', { replyTo: 'chat-42' }), TX);
    expect((queued[1]!.job.payload as AnswerJob).to).to.equal('chat-42');
  });

  it('answers nothing on a channel without an agent', async () => {
    await answers.inbound(inbound('hello', {}, 'quiet'), TX);
    expect(queued).to.deep.equal([]);
  });

  it('in a room, answers only what addresses its nick, naming who spoke', async () => {
    const room = { kind: 'group', room: '#ops' } as const;
    await answers.inbound(inbound('just chatting', room), TX);
    await answers.inbound(inbound('g.w:   ', room), TX);
    await answers.inbound(inbound('gxw: regex dots are literal', room), TX);
    expect(queued, 'not addressed').to.deep.equal([]);
    await answers.inbound(inbound('G.W, deploy please', room), TX);
    await answers.inbound(inbound('<@U1> status?', { ...room, addressed: { text: 'status?' } }), TX);
    expect(queued.map(({ job }) => [(job.payload as AnswerJob).text, (job.payload as AnswerJob).to])).to.deep.equal([['Ann: deploy please', '#ops'], ['Ann: status?', '#ops']]);
  });

  it('finds the text addressed to a nick', () => {
    expect(addressedTo('gw', 'gw: hi')).to.equal('hi');
    expect(addressedTo('gw', '  GW ,  hi there')).to.equal('hi there');
    expect(addressedTo('gw', 'gwen: hi')).to.equal(undefined);
    expect(addressedTo('gw', 'hi gw:')).to.equal(undefined);
    expect(addressedTo('a+b', 'a+b: x')).to.equal('x');
    expect(addressedTo(undefined, 'gw: hi')).to.equal(undefined);
  });

  it('tells a sender over the limit once, then stays silent until the window passes; senders count apart', async () => {
    for (let n = 0; n < 4; n++) await answers.inbound(inbound(`m${n}`), TX);
    await answers.inbound(inbound('other', { sender: 'bob', senderName: 'Bob' }), TX);
    expect(queued.map(({ job }) => (job.payload as AnswerJob).text)).to.deep.equal(['m0', 'm1', 'other']);
    expect(replies).to.deep.equal([{ tx: TX, item: { channel: 'irc', account: 'main', to: 'Ann', text: 'Ann: you have reached 2 messages for now; I will answer again in about 10 minutes.' } }]);
    now += 600_000;
    await answers.inbound(inbound('later'), TX);
    expect(queued.at(-1)!.job.payload).to.deep.include({ text: 'later' });
    // A new window read from the configuration starts the counts again.
    config = { ...config, runtime: { ...config.runtime, senderLimit: { max: 2, windowMs: 60_000 } } };
    await answers.inbound(inbound('after the change'), TX);
    await answers.inbound(inbound('and again'), TX);
    expect(queued.map(({ job }) => (job.payload as AnswerJob).text).slice(-2)).to.deep.equal(['after the change', 'and again']);
  });

  it('runs the agent for the person who spoke, and replies once under the run\'s key', async () => {
    const outcome = await answers.answer(job({ text: 'Ann: hi', to: '#ops' }), { attempt: 1 });
    expect(outcome).to.deep.equal({ runId: 'run_1', status: 'succeeded', replied: true });
    expect(runs[0]).to.deep.include({ agentId: 'helper', session: { key: 'irc:main:dm:ann' }, text: 'Ann: hi', recordedId: 7, surface: 'channel', sender: { id: 'ann', name: 'Ann' }, person: 'peer:irc:main:ann' });
    expect(runs[0]!.onEvent, 'no stream on this channel').to.equal(undefined);
    expect(replies.map(({ item }) => item)).to.deep.equal([{ channel: 'irc', account: 'main', to: '#ops', text: 'Hello Ann.', key: 'run:run_1', sessionKey: 'irc:main:dm:ann', runId: 'run_1', turnId: 7 }]);
    expect(typing[0]).to.equal('irc:main:#ops');
  });

  it('keeps the recipient seeing the reply being written until it is done', async () => {
    answer = () => new Promise((resolve) => setTimeout(() => resolve({ runId: 'run_1', status: 'succeeded', text: 'done' }), 40));
    await answers.answer(job(), { attempt: 1 });
    const during = typing.length;
    expect(during).to.be.greaterThan(2);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(typing.length, 'stopped with the run').to.equal(during);
  });

  it('streams the reply as it is written, and the final text replaces the streamed message', async () => {
    stream = { pushed: [], finished: 0 };
    answer = async () => {
      runs[0]!.onEvent!({ type: 'delta', text: 'Hel', runId: 'run_1' });
      runs[0]!.onEvent!({ type: 'model', ref: 'x/y', runId: 'run_1' });
      runs[0]!.onEvent!({ type: 'delta', text: 'lo', runId: 'run_1' });
      return { runId: 'run_1', status: 'succeeded', text: 'Hello' };
    };
    await answers.answer(job(), { attempt: 1 });
    expect(stream.pushed).to.deep.equal(['Hel', 'lo']);
    expect(stream.finished).to.equal(1);
    expect(replies[0]!.item).to.include({ editOf: 'msg-9', text: 'Hello' });
  });

  it('an empty answer sends nothing; a retry after an answer went out sends nothing again', async () => {
    answer = async () => ({ runId: 'run_2', status: 'succeeded', text: '  ' });
    expect(await answers.answer(job(), { attempt: 1 })).to.deep.equal({ runId: 'run_2', status: 'succeeded', replied: false });
    answeredBefore = true;
    expect(await answers.answer(job(), { attempt: 1 }), 'a first attempt always runs').to.include({ replied: false });
    expect(await answers.answer(job(), { attempt: 2 })).to.deep.equal({ answered: 'by an earlier attempt' });
    expect(runs).to.have.length(2);
    expect(replies).to.deep.equal([]);
  });

  it('a failed run is answered with an apology once; an aborted one with nothing; an interrupted one is tried again', async () => {
    answer = async () => { throw new DomainError('upstream', 'the model is down'); };
    expect(await answers.answer(job(), { attempt: 1 })).to.deep.equal({ failed: 'the model is down' });
    expect(replies.map(({ item }) => [item.key, item.text])).to.deep.equal([['unanswered:irc:main:dm:ann:7', 'Sorry, I could not answer that just now; please try again later.']]);
    answer = async () => { throw new DomainError('unavailable', 'The run was aborted: by an operator.', { code: 'run_aborted' }); };
    expect(await answers.answer(job(), { attempt: 1 })).to.deep.equal({ aborted: 'The run was aborted: by an operator.' });
    const interrupted = new DomainError('unavailable', 'The run was interrupted.', { code: 'run_interrupted' });
    answer = async () => { throw interrupted; };
    expect(await answers.answer(job(), { attempt: 1 }).catch((error: unknown) => error)).to.equal(interrupted);
    const stopping = new DomainError('unavailable', 'The gateway is stopping.', { retryable: true });
    answer = async () => { throw stopping; };
    expect(await answers.answer(job(), { attempt: 1 }).catch((error: unknown) => error)).to.equal(stopping);
    expect(replies).to.have.length(1);
  });
});
