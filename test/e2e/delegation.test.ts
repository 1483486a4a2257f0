import { expect } from 'chai';
import { freePort, Home, waitFor } from '../support/cli.ts';
import { openaiError, openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

/** The last message the model was sent in a request: what a tool call's result told it. */
const lastSent = (upstream: ScriptedUpstream, index = -1) => JSON.stringify(upstream.requests.at(index)!.body.messages.at(-1));

describe('delegation: an agent hands a task to another, waits or is answered later, within its limits, and nothing is lost (e2e)', function () {
  this.timeout(180_000);
  let home: Home;
  /** One scripted model per agent, so each agent's steps are scripted on their own. */
  let planner: ScriptedUpstream;
  let researcher: ScriptedUpstream;
  let broken: ScriptedUpstream;

  const chat = async (text: string, session: string) => {
    const result = await home.run(['chat', '--agent', 'planner', '--session', session, text, '--json']);
    expect(result.code, result.stderr).to.equal(0);
    return JSON.parse(result.stdout);
  };
  const show = async (key: string) => home.json(['sessions', 'show', key]);

  before(async () => {
    [planner, researcher, broken] = await Promise.all([new ScriptedUpstream().start(), new ScriptedUpstream().start(), new ScriptedUpstream().start()]);
    broken.responder = () => openaiError(500, 'the model server is out of order');
    home = new Home({ GATEWAY_PORT: String(await freePort()) });
    for (const [id, upstream] of [['planner', planner], ['researcher', researcher], ['broken', broken]] as const) {
      await home.set(`models.providers.${id}`, { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    }
    await home.set('agents.helper', { model: 'researcher/m' });
    await home.set('agents.broken', { model: 'broken/m' });
    await home.set('agents.researcher', { model: 'researcher/m', delegation: { agents: ['helper'], depth: 1 } });
    await home.set('agents.planner', { model: 'planner/m', delegation: { agents: ['researcher', 'broken'], maxChildren: 1, timeoutSeconds: 30 } });
    // One memory all the keeper's people share; the lead keeps each person's apart (the default) and lets nothing go deeper than one.
    await home.set('agents.keeper', { model: 'researcher/m', memory: { scope: 'agent' } });
    await home.set('agents.lead', { model: 'planner/m', delegation: { agents: ['planner', 'keeper'], depth: 1, timeoutSeconds: 30 } });
    // A killed daemon's running job is taken back on a shared store once its sessions are gone from the server, at the latest when its lease runs out (the shortest allowed here).
    await home.set('jobs.leaseSeconds', 5);
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
  });
  after(async () => {
    home?.cleanup();
    await Promise.all([planner?.stop(), researcher?.stop(), broken?.stop()]);
  });
  beforeEach(() => {
    planner.reset();
    researcher.reset();
  });

  it('refuses a target outside delegation.agents in config set, with a clear error naming it', async () => {
    const set = await home.run(['config', 'set', 'agents.planner.delegation.agents', '["researcher","nobody"]']);
    expect(set.code).to.equal(2);
    expect(set.stderr).to.include('agents.planner.delegation.agents: there is no agent "nobody"');
  });

  it('waits for the child\'s answer: the child runs in a session of its own, linked to its parent, and its usage counts to both', async () => {
    planner.enqueue(
      openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'researcher', task: 'Find the boiling point of water at sea level.', wait: true } }]),
      openaiText('Water boils at 100 C at sea level.'),
    );
    researcher.enqueue(openaiText('100 degrees Celsius.', { prompt_tokens: 30, completion_tokens: 5 }));
    const answer = await chat('How hot does water boil?', 'wait');
    expect(answer.text).to.equal('Water boils at 100 C at sea level.');
    // The child read the task as its turn; the parent read the child's answer as the tool's result.
    expect(lastSent(researcher)).to.include('Find the boiling point of water at sea level.');
    expect(lastSent(planner)).to.include('100 degrees Celsius.').and.to.include('succeeded');

    const parent = await show('chat:planner:dm:wait');
    expect(parent.delegation.parent).to.equal(null);
    expect(parent.delegation.children).to.have.length(1);
    const [child] = parent.delegation.children;
    expect(child).to.include({ sessionKey: 'delegate:chat:planner:dm:wait:1', agent: 'researcher', parentAgent: 'planner', status: 'succeeded', answer: '100 degrees Celsius.', wait: true, depth: 1 });
    expect(child.usage).to.deep.equal({ inputTokens: 30, outputTokens: 5 });
    expect(child.deliveredAt).to.be.a('string');
    const childSession = await show(child.sessionKey);
    expect(childSession.delegation.parent).to.include({ parentSession: 'chat:planner:dm:wait', agent: 'researcher' });
    expect(childSession.messages.map((message: any) => [message.role, message.text])).to.deep.equal([
      ['user', 'Find the boiling point of water at sea level.'], ['assistant', '100 degrees Celsius.'],
    ]);
    const text = await home.run(['sessions', 'show', 'chat:planner:dm:wait']);
    expect(text.stdout).to.include('delegated to researcher: delegate:chat:planner:dm:wait:1 (succeeded');

    const usage = await home.json(['usage']);
    expect(usage.byAgent.find((group: any) => group.key === 'researcher')).to.include({ inputTokens: 30, outputTokens: 5 });
    expect(usage.byDelegator.find((group: any) => group.key === 'planner')).to.include({ calls: 1, inputTokens: 30, outputTokens: 5 });
  });

  it('without wait, answers at once and brings the child\'s answer back later as a new turn the parent answers', async () => {
    planner.enqueue(
      openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'researcher', task: 'List three prime numbers.', wait: false } }]),
      openaiText('I asked the researcher; the answer will follow.'),
      openaiText('The researcher says: 2, 3 and 5.'),
    );
    researcher.enqueue({ ...openaiText('2, 3, 5'), delayMs: 1500 });
    const answer = await chat('Give me primes.', 'later');
    expect(answer.text).to.equal('I asked the researcher; the answer will follow.');
    expect(lastSent(planner)).to.include('delegate:chat:planner:dm:later:1').and.to.include('running');
    const done = await waitFor(async () => {
      const shown = await show('chat:planner:dm:later');
      return shown.messages.some((message: any) => message.text === 'The researcher says: 2, 3 and 5.') ? shown : undefined;
    }, 30_000, 'the parent to answer the child\'s answer');
    const texts = done.messages.filter((message: any) => message.kind === 'message').map((message: any) => message.text);
    expect(texts.slice(-2)).to.deep.equal(['Agent researcher answered the task you delegated (delegate:chat:planner:dm:later:1):\n2, 3, 5', 'The researcher says: 2, 3 and 5.']);
    expect(lastSent(planner)).to.include('2, 3, 5');
  });

  it('bounds targets, depth and children at once, and returns a failing child\'s failure to its parent', async () => {
    // Not a target of the planner.
    planner.enqueue(openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'helper', task: 'anything' } }]), openaiText('ok'));
    await chat('Ask the helper.', 'limits');
    expect(lastSent(planner)).to.include('Agent planner may not delegate to helper: it may delegate to researcher, broken (agents.planner.delegation.agents).');

    // The researcher may delegate one level deep only: its child's delegation is refused, and the child answers itself.
    planner.enqueue(openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'researcher', task: 'Ask the helper for the time.' } }]), openaiText('done'));
    researcher.enqueue(openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'helper', task: 'What time is it?' } }]), openaiText('I could not ask further.'));
    await chat('Go deep.', 'limits');
    expect(lastSent(researcher)).to.include('agent researcher may delegate no deeper than 1 (agents.researcher.delegation.depth)');

    // One child at once for the planner: a second delegation while the first runs is refused.
    planner.enqueue(
      openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'researcher', task: 'Slow task.', wait: false } }]),
      openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'researcher', task: 'Second task.', wait: false } }]),
      openaiText('One at a time.'),
      openaiText('The slow task is done.'),
    );
    researcher.enqueue({ ...openaiText('slow answer'), delayMs: 2000 });
    const asked = planner.requests.length;
    await chat('Two things.', 'limits');
    expect(lastSent(planner, asked + 2)).to.include('1 delegated task is running for this conversation already (agents.planner.delegation.maxChildren)');

    // A child whose model fails: the parent gets the failure as the tool's result.
    planner.enqueue(openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'broken', task: 'Try this.' } }]), openaiText('The broken agent failed.'));
    await waitFor(async () => ((await show('chat:planner:dm:limits')).messages.some((message: any) => message.text === 'The slow task is done.') || undefined), 30_000, 'the slow task to come back');
    const failed = await chat('Use the broken one.', 'failing');
    expect(failed.text).to.equal('The broken agent failed.');
    expect(lastSent(planner)).to.include('failed').and.to.include('the model server is out of order');
    const shown = await show('chat:planner:dm:failing');
    expect(shown.delegation.children[0]).to.include({ agent: 'broken', status: 'failed' });
    expect(shown.delegation.children[0].error).to.include('the model server is out of order');
  });

  it('an agent\'s depth holds for everything below its runs: the agent it handed a task to may not hand it further, whatever its own depth', async () => {
    planner.enqueue(
      openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'planner', task: 'Ask the researcher for the time.' } }]),
      openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'researcher', task: 'What time is it?' } }]),
      openaiText('I could not ask further.'),
      openaiText('The planner could not ask further.'),
    );
    const result = await home.run(['chat', '--agent', 'lead', '--session', 'deep', 'Go deep.', '--json']);
    expect(result.code, result.stderr).to.equal(0);
    expect(JSON.parse(result.stdout).text).to.equal('The planner could not ask further.');
    // The planner (depth 2) read why its delegation, two below the lead's run, was refused.
    expect(lastSent(planner, 2)).to.include('This task was delegated 1 time already, starting from a run of agent lead, whose tasks go no deeper than 1 (agents.lead.delegation.depth)');
    expect(researcher.requests, 'the researcher never ran').to.have.length(0);
  });

  it('an agent keeping each person\'s memory apart may not hand a task to one whose memory its people share, unless the operator allows it; doctor warns while it does', async () => {
    const delegationCheck = async () => (await home.run(['doctor', '--json'])).json.checks.find((check: any) => check.name === 'delegation');
    planner.enqueue(openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'keeper', task: 'Remember that my door code is 4711.' } }]), openaiText('I keep that to myself.'));
    const refused = await home.run(['chat', '--agent', 'lead', '--session', 'shared', 'Have it remembered.', '--json']);
    expect(refused.code, refused.stderr).to.equal(0);
    expect(lastSent(planner)).to.include('Agent lead may not hand a task to keeper: keeper\'s memory is shared by all its people (agents.keeper.memory.scope agent)')
      .and.to.include('the operator may allow it with agents.lead.delegation.allowSharedMemory true');
    expect(researcher.requests, 'the keeper never ran').to.have.length(0);
    expect((await show('chat:lead:dm:shared')).delegation ?? null, 'no delegation recorded').to.equal(null);
    expect(await delegationCheck()).to.equal(undefined);

    await home.set('agents.lead.delegation.allowSharedMemory', true);
    try {
      const check = await delegationCheck();
      expect(check).to.include({ status: 'warn' });
      expect(check.detail).to.equal('agent lead keeps each person\'s memory apart, but may hand tasks to keeper, whose memory all its people share (agents.lead.delegation.allowSharedMemory): one person\'s words can reach what others read');
      expect(check.fix).to.include('gateway config set agents.lead.delegation.allowSharedMemory false');
      planner.enqueue(openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'keeper', task: 'Remember that the team meets on Mondays.' } }]), openaiText('The keeper has it.'));
      researcher.enqueue(openaiText('Noted: Mondays.'));
      const allowed = await home.run(['chat', '--agent', 'lead', '--session', 'shared', 'Have the meeting day remembered.', '--json']);
      expect(allowed.code, allowed.stderr).to.equal(0);
      expect(lastSent(planner)).to.include('Noted: Mondays.').and.to.include('succeeded');
    } finally {
      await home.set('agents.lead.delegation.allowSharedMemory', false);
    }
  });

  it('a daemon killed while a child runs finishes it after the restart, and the answer comes back once', async () => {
    planner.enqueue(
      openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'researcher', task: 'Count the moons of Mars.', wait: false } }]),
      openaiText('Asked; the answer will follow.'),
      openaiText('Mars has two moons, says the researcher.'),
    );
    researcher.enqueue({ hang: true }, openaiText('Two: Phobos and Deimos.'));
    await chat('How many moons has Mars?', 'killed');
    await waitFor(async () => researcher.requests.length === 1 || undefined, 10_000, 'the child to ask its model');
    process.kill(home.lock().pid, 'SIGKILL');
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
    const done = await waitFor(async () => {
      const shown = await show('chat:planner:dm:killed');
      return shown.messages.some((message: any) => message.text === 'Mars has two moons, says the researcher.') ? shown : undefined;
    }, 60_000, 'the child\'s answer after the restart');
    // Give a second hand-back every chance to show itself.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const again = await show('chat:planner:dm:killed');
    const handedBack = again.messages.filter((message: any) => message.text.startsWith('Agent researcher answered'));
    expect(handedBack, 'the answer came back once').to.have.length(1);
    expect(handedBack[0].text).to.include('Two: Phobos and Deimos.');
    expect(again.messages.filter((message: any) => message.text === 'Mars has two moons, says the researcher.')).to.have.length(1);
    expect(done.delegation.children[0]).to.include({ status: 'succeeded', answer: 'Two: Phobos and Deimos.' });
    expect(planner.requests).to.have.length(3);
  });
});
