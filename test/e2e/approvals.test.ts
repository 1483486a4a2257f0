import { expect } from 'chai';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { DiscordApi, type DiscordUser } from '../support/discord-api.ts';
import { IrcServer, IrcUser } from '../support/irc.ts';
import { sharedPostgres } from '../support/postgres.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';
import { SlackApi } from '../support/slack-api.ts';
import { TelegramApi, type TgChat, type TgUser } from '../support/telegram-api.ts';
import { WhatsAppApi } from '../support/whatsapp-api.ts';

const GATEWAY_TOKEN = 'approvals-gateway-token-for-tests';
const TG_TOKEN = '7001234567:AAH-approvals-token-for-the-stand-in';

/** A command run through exec over HTTP, as a script would call it: resolves with the answer once the command ran (or was refused). */
const execOver = (base: string, command: string) => fetch(`${base}/tools/invoke`, {
  method: 'POST', headers: { authorization: `Bearer ${GATEWAY_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ tool: 'exec', args: { command } }),
}).then(async (response) => ({ status: response.status, body: await response.json() as any }));

/** A daemon whose exec asks before every command, over HTTP with a known token. */
async function askingHome(extra: Record<string, unknown>, env: Record<string, string> = {}): Promise<{ home: Home; base: string }> {
  const port = await freePort();
  const home = new Home({ GATEWAY_PORT: String(port), GATEWAY_TOKEN, ...env });
  await home.set('gateway.tools.allow', ['exec']);
  await home.set('tools.exec.approval', 'ask');
  for (const [key, value] of Object.entries(extra)) await home.set(key, value);
  return { home, base: `http://127.0.0.1:${port}` };
}

const audit = async (home: Home) => (await home.json(['audit', '--limit', '200'])).events as any[];

describe('approvals in the chat: answered by button, by words, or from the CLI; the first answer wins (e2e)', function () {
  this.timeout(120_000);

  describe('Telegram: inline keyboards and callback queries', () => {
    let api: TelegramApi;
    let home: Home;
    let base: string;
    const ops: TgUser = { id: 4_100_001, first_name: 'Olga', username: 'olga_ops' };
    const stranger: TgUser = { id: 4_100_002, first_name: 'Sam', username: 'sam_x' };
    const room: TgChat = { id: -1004100000, type: 'supergroup', title: 'ops' };
    /** The approval request told to the ops room with buttons, for a command. */
    const requestFor = (command: string) => waitFor(() => api.sent(room.id).find((sent) => String(sent.body.text).includes(command) && sent.body.reply_markup), 20_000, `the request for ${command}`);
    const dataOf = (request: any, label: string) => (request.body.reply_markup.inline_keyboard.flat() as any[]).find((key) => key.text === label).callback_data as string;

    beforeEach(async () => {
      api = await new TelegramApi().start();
      api.addBot(TG_TOKEN, 'gw_approvals_bot');
      api.openChat(room);
      ({ home, base } = await askingHome({
        'channels.telegram': { enabled: true, apiRoot: api.apiRoot, reconnectMaxDelayMs: 2000 },
        approvals: { notify: [{ channel: 'telegram', to: String(room.id) }], approvers: [`telegram:${ops.id}`] },
      }));
      expect((await home.run(['secrets', 'set', 'channels.telegram.botToken'], { input: TG_TOKEN })).code).to.equal(0);
      expect((await home.run(['start'])).code).to.equal(0);
      await waitFor(async () => ((await home.json(['channels', 'status'])).channels.find((c: any) => c.channel === 'telegram')?.state === 'connected' ? true : undefined), 20_000, 'the bot to connect');
    });
    afterEach(async () => {
      home.cleanup();
      await api.stop();
    });

    it('an approver\'s button runs the command; a stranger\'s press is refused and told; the message says who decided, its buttons gone; all in the audit', async () => {
      const running = execOver(base, 'echo approved by button');
      const request = await requestFor('echo approved by button');
      const [pending] = (await home.json(['approvals', 'list'])).approvals;
      expect(request.body.text).to.include(`Approval ${pending.code}`).and.to.include(`reply "approve ${pending.code}"`);
      expect(dataOf(request, 'Approve')).to.equal(`ap:y:${pending.id}`);
      const posted = Number(request.result.message_id);

      // A stranger in the room presses Approve: refused, told in a toast, and nothing runs.
      const refusedQuery = api.press(TG_TOKEN, { from: stranger, chat: room, messageId: posted, data: dataOf(request, 'Approve') });
      const refused = await waitFor(() => api.answers(refusedQuery)[0], 10_000, 'the stranger\'s toast');
      expect(refused.body.text).to.match(/not one of this gateway's approvers/);
      expect((await home.json(['approvals', 'list'])).approvals.map((a: any) => a.id)).to.deep.equal([pending.id]);

      // The approver presses Approve: the command runs, the toast says so, the room's message is edited without its buttons.
      const query = api.press(TG_TOKEN, { from: ops, chat: room, messageId: posted, data: dataOf(request, 'Approve') });
      const result = await running;
      expect(result.status, JSON.stringify(result.body)).to.equal(200);
      expect(result.body.result.stdout).to.equal('approved by button\n');
      expect((await waitFor(() => api.answers(query)[0])).body.text).to.match(new RegExp(`^Approved ${pending.code}`));
      const edit = await waitFor(() => api.sent(room.id, ['editMessageText']).find((sent) => String(sent.body.text).includes(`approved by telegram:${ops.id} (telegram)`)), 10_000, 'the edited request');
      expect(Number(edit.body.message_id)).to.equal(posted);
      expect(edit.body.reply_markup, 'the buttons are gone').to.equal(undefined);

      const events = await audit(home);
      const approved = events.filter((event) => event.kind === 'exec.approved' && event.subject === pending.id);
      expect(approved).to.have.length(1);
      expect(approved[0]).to.include({ actor: `telegram:${ops.id}` });
      expect(approved[0].detail).to.include({ via: 'telegram', command: 'echo approved by button' });
      expect(events.some((event) => event.kind === 'exec.approval.refused' && event.actor === `telegram:${stranger.id}` && event.subject === pending.id)).to.equal(true);
    });

    it('the first answer wins: the CLI before the button (the press is told who decided), and a CLI and a button at once decide once', async () => {
      const running = execOver(base, 'echo first from the cli');
      const request = await requestFor('echo first from the cli');
      const posted = Number(request.result.message_id);
      const [pending] = (await home.json(['approvals', 'list'])).approvals;
      // The CLI takes the short code a chat answers with.
      const approved = await home.run(['approvals', 'approve', pending.code]);
      expect(approved.code, approved.stderr).to.equal(0);
      expect((await running).body.result.stdout).to.equal('first from the cli\n');
      const late = api.press(TG_TOKEN, { from: ops, chat: room, messageId: posted, data: dataOf(request, 'Reject') });
      expect((await waitFor(() => api.answers(late)[0])).body.text).to.match(new RegExp(`^Approval ${pending.code} was already approved by device:\\S+ \\(cli\\)`));
      await waitFor(() => api.sent(room.id, ['editMessageText']).find((sent) => String(sent.body.text).includes('(cli)')), 10_000, 'the request edited to say the CLI decided');

      // A press and the CLI at the same moment: one decision, the other told it came late.
      const racing = execOver(base, 'echo raced');
      const raceRequest = await requestFor('echo raced');
      const racePending = (await home.json(['approvals', 'list'])).approvals[0];
      const racePosted = Number(raceRequest.result.message_id);
      const [cli] = await Promise.all([
        home.run(['approvals', 'reject', racePending.id]),
        Promise.resolve(api.press(TG_TOKEN, { from: ops, chat: room, messageId: racePosted, data: dataOf(raceRequest, 'Approve') })),
      ]);
      const outcome = await racing;
      const decisions = (await audit(home)).filter((event) => (event.kind === 'exec.approved' || event.kind === 'exec.rejected') && event.subject === racePending.id);
      expect(decisions, 'decided once').to.have.length(1);
      if (decisions[0].kind === 'exec.rejected') {
        expect(cli.code).to.equal(0);
        expect(outcome.status).to.equal(403);
      } else {
        expect(cli.code).to.equal(1);
        expect(cli.stderr).to.match(/was already approved by telegram:/);
        expect(outcome.body.result.stdout).to.equal('raced\n');
      }
      const firstDecisions = (await audit(home)).filter((event) => (event.kind === 'exec.approved' || event.kind === 'exec.rejected') && event.subject === pending.id);
      expect(firstDecisions.map((event) => [event.kind, event.detail.via])).to.deep.equal([['exec.approved', 'cli']]);
    });
  });

  describe('Slack: buttons in an actions block, and the signed interactivity request', () => {
    let slack: SlackApi;
    let home: Home;
    let base: string;
    const opsUser = 'UOPS00001';
    const otherUser = 'UOTHER001';
    const opsChannel = 'C0OPS0001';
    const blocksOf = (call: any) => (typeof call.body.blocks === 'string' ? JSON.parse(call.body.blocks) : call.body.blocks) as any[] | undefined;
    const valueOf = (call: any, label: string) => blocksOf(call)!.find((block) => block.type === 'actions').elements.find((element: any) => element.text.text === label).value as string;

    beforeEach(async () => {
      slack = await new SlackApi().start();
      slack.channel(opsChannel);
      slack.user(opsUser, 'Olga');
      ({ home, base } = await askingHome({
        'channels.slack': { enabled: true, apiRoot: slack.apiRoot, events: 'http', reconnectMaxDelayMs: 2000 },
        approvals: { notify: [{ channel: 'slack', to: opsChannel }], approvers: [`slack:${opsUser.toLowerCase()}`] },
      }));
      expect((await home.run(['secrets', 'set', 'channels.slack.botToken'], { input: slack.botToken })).code).to.equal(0);
      expect((await home.run(['secrets', 'set', 'channels.slack.signingSecret'], { input: slack.signingSecret })).code).to.equal(0);
      expect((await home.run(['start'])).code).to.equal(0);
      await waitFor(async () => ((await home.json(['channels', 'status'])).channels.find((c: any) => c.channel === 'slack')?.state === 'connected' ? true : undefined), 20_000, 'the app to connect');
    });
    afterEach(async () => {
      home.cleanup();
      await slack.stop();
    });

    it('an approver\'s button press (a signed interactivity request) runs the command; another person is told alone; a forged request is refused', async () => {
      const running = execOver(base, 'echo approved in slack');
      const request = await waitFor(() => slack.posted(opsChannel).find((call) => String(call.body.text).includes('echo approved in slack')), 20_000, 'the request in #ops');
      const [pending] = (await home.json(['approvals', 'list'])).approvals;
      expect(valueOf(request, 'Approve')).to.equal(`ap:y:${pending.id}`);
      const ts = `${Math.floor(Date.now() / 1000)}.000001`;
      const url = `${base}/channels/slack/default/interactivity`;

      const forged = await slack.interact(url, slack.blockAction({ user: opsUser, channel: opsChannel, messageTs: ts, value: valueOf(request, 'Approve') }), { secret: 'not-the-signing-secret' });
      expect(forged.status).to.equal(401);

      const other = await slack.interact(url, slack.blockAction({ user: otherUser, channel: opsChannel, messageTs: ts, value: valueOf(request, 'Approve') }));
      expect(other.status).to.equal(200);
      expect((await waitFor(() => slack.ephemeral(otherUser)[0])).body.text).to.match(/not one of this gateway's approvers/);
      expect((await home.json(['approvals', 'list'])).approvals).to.have.length(1);

      const pressed = await slack.interact(url, slack.blockAction({ user: opsUser, channel: opsChannel, messageTs: ts, value: valueOf(request, 'Approve') }));
      expect(pressed.status).to.equal(200);
      expect((await running).body.result.stdout).to.equal('approved in slack\n');
      const update = await waitFor(() => slack.updated(opsChannel).find((call) => String(call.body.text).includes(`approved by slack:${opsUser}`)), 10_000, 'the request updated');
      expect(blocksOf(update), 'its buttons are gone').to.deep.equal([]);
      const decided = (await audit(home)).find((event) => event.kind === 'exec.approved' && event.subject === pending.id);
      expect(decided).to.include({ actor: `slack:${opsUser}` });
      expect(decided.detail.via).to.equal('slack');
    });
  });

  describe('Slack over Socket Mode: an interaction in an envelope', () => {
    it('a press comes as an interactive envelope, is acted on and acknowledged; the message loses its buttons', async () => {
      const slack = await new SlackApi().start();
      slack.channel('C0OPS0002');
      const { home, base } = await askingHome({
        'channels.slack': { enabled: true, apiRoot: slack.apiRoot, reconnectMaxDelayMs: 2000 },
        approvals: { notify: [{ channel: 'slack', to: 'C0OPS0002' }], approvers: ['slack:UOPS00002'] },
      });
      try {
        expect((await home.run(['secrets', 'set', 'channels.slack.botToken'], { input: slack.botToken })).code).to.equal(0);
        expect((await home.run(['secrets', 'set', 'channels.slack.appToken'], { input: slack.appToken })).code).to.equal(0);
        expect((await home.run(['start'])).code).to.equal(0);
        await waitFor(() => (slack.connectedNow ? true : undefined), 20_000, 'Socket Mode');
        const running = execOver(base, 'echo over the socket');
        const request = await waitFor(() => slack.posted('C0OPS0002').find((call) => String(call.body.text).includes('echo over the socket')), 20_000, 'the request');
        const blocks = typeof request.body.blocks === 'string' ? JSON.parse(request.body.blocks) : request.body.blocks;
        const value = blocks.find((block: any) => block.type === 'actions').elements[0].value as string;
        const acked = slack.acked.length;
        slack.interactive(slack.blockAction({ user: 'UOPS00002', channel: 'C0OPS0002', messageTs: '1.000001', value }));
        expect((await running).body.result.stdout).to.equal('over the socket\n');
        await waitFor(() => (slack.acked.length > acked ? true : undefined), 10_000, 'the envelope acknowledged');
        await waitFor(() => slack.updated('C0OPS0002').find((call) => String(call.body.text).includes('approved by slack:UOPS00002 (slack)')), 10_000, 'the request updated');
      } finally {
        home.cleanup();
        await slack.stop();
      }
    });
  });

  describe('Discord: message components and interactions', () => {
    let discord: DiscordApi;
    let home: Home;
    let base: string;
    const ops: DiscordUser = { id: '1100000000000000101', username: 'olga' };
    const other: DiscordUser = { id: '1100000000000000102', username: 'sam' };
    let opsChannel: string;
    const componentOf = (call: any, label: string) => (call.body.components as any[]).flatMap((row) => row.components).find((button: any) => button.label === label);

    beforeEach(async () => {
      discord = await new DiscordApi().start();
      opsChannel = discord.channel();
      ({ home, base } = await askingHome({
        'channels.discord': { enabled: true, apiRoot: discord.apiRoot, reconnectMaxDelayMs: 2000 },
        approvals: { notify: [{ channel: 'discord', to: opsChannel }], approvers: [`discord:${ops.id}`] },
      }));
      expect((await home.run(['secrets', 'set', 'channels.discord.botToken'], { input: discord.token })).code).to.equal(0);
      expect((await home.run(['start'])).code).to.equal(0);
      await waitFor(() => (discord.connectedNow ? true : undefined), 20_000, 'the bot to connect');
    });
    afterEach(async () => {
      home.cleanup();
      await discord.stop();
    });

    it('an approver\'s button rejects the command; another person\'s press is answered to them alone; the message loses its buttons', async () => {
      const running = execOver(base, 'touch rejected-in-discord');
      const request = await waitFor(() => discord.sent(opsChannel).find((call) => String(call.body.content).includes('touch rejected-in-discord')), 20_000, 'the request');
      const [pending] = (await home.json(['approvals', 'list'])).approvals;
      expect(componentOf(request, 'Reject').custom_id).to.equal(`ap:n:${pending.id}`);
      const messageId = String(request.response.id);

      const refused = discord.press({ user: other, channel: opsChannel, messageId, customId: componentOf(request, 'Reject').custom_id, guild: true });
      const answer = await waitFor(() => discord.interactions(refused.id)[0], 10_000, 'the answer to the stranger');
      expect(answer.body).to.deep.include({ type: 4 });
      expect(answer.body.data.flags).to.equal(64);
      expect(answer.body.data.content).to.match(/not one of this gateway's approvers/);

      const pressed = discord.press({ user: ops, channel: opsChannel, messageId, customId: componentOf(request, 'Reject').custom_id, guild: true });
      const outcome = await running;
      expect(outcome.status).to.equal(403);
      expect(outcome.body.message).to.match(/rejected the command/);
      expect((await waitFor(() => discord.interactions(pressed.id)[0])).body.data.content).to.match(new RegExp(`^Rejected ${pending.code}`));
      const edit = await waitFor(() => discord.edited(opsChannel).find((call) => String(call.body.content).includes(`rejected by discord:${ops.id} (discord)`)), 10_000, 'the request edited');
      expect(edit.path).to.equal(`/channels/${opsChannel}/messages/${messageId}`);
      expect(edit.body.components, 'its buttons are gone').to.deep.equal([]);
    });
  });

  describe('IRC (ngircd): an approver\'s words, which never reach the agent', () => {
    let ircd: IrcServer;
    let home: Home;
    let base: string;
    let upstream: ScriptedUpstream;
    let nick: string;
    const users: IrcUser[] = [];
    let serial = 0;

    before(async () => {
      ircd = await IrcServer.start();
    });
    after(async () => {
      await ircd?.stop();
    });
    beforeEach(async () => {
      upstream = await new ScriptedUpstream().start();
      nick = `gwap${++serial}${process.pid % 100}`;
    });
    afterEach(async () => {
      users.splice(0).forEach((user) => user.quit());
      home?.cleanup();
      await upstream.stop();
    });

    const startWith = async (alice: IrcUser, extra: Record<string, unknown> = {}) => {
      ({ home, base } = await askingHome({
        'models.providers.script': { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } },
        'agents.helper': { model: 'script/m', tools: ['ask'] },
        // Everyone may talk to the agent: an answer in words must still never reach it.
        'channels.irc': { enabled: true, host: '127.0.0.1', port: ircd.port, nick, reconnectMaxDelayMs: 2000, agent: 'helper', dmPolicy: 'open', allowFrom: ['*'] },
        approvals: { notify: [{ channel: 'irc', to: alice.nick }], approvers: [`irc:${alice.nick}`] },
        ...extra,
      }));
      expect((await home.run(['start'])).code).to.equal(0);
      await waitFor(async () => ((await home.json(['channels', 'status'])).channels.find((c: any) => c.channel === 'irc')?.state === 'connected' ? true : undefined), 20_000, 'IRC to connect');
    };

    it('"approve <code>" from an approver runs the command; a non-approver\'s is refused and told; neither is a turn for the agent', async () => {
      const alice = await IrcUser.connect(ircd.port, `Alice${serial}`);
      const bob = await IrcUser.connect(ircd.port, `bob${serial}`);
      users.push(alice, bob);
      await startWith(alice);
      const running = execOver(base, 'echo approved in words');
      const told = await alice.waitFor(/^Reply "approve [0-9a-f]{4}" or "reject [0-9a-f]{4}"\.$/, { timeoutMs: 20_000 });
      const code = /approve ([0-9a-f]{4})/.exec(told.text)![1]!;
      expect(alice.received.map((message) => message.text).join('\n')).to.include('echo approved in words');

      const seen = bob.received.length;
      bob.say(nick, `approve ${code}`);
      await bob.waitFor(/not one of this gateway's approvers/, { after: seen, timeoutMs: 10_000 });
      expect((await home.json(['approvals', 'list'])).approvals).to.have.length(1);

      // The approver's reply is in mixed case, with the nick's case as she typed it.
      alice.say(nick, `Approve ${code.toUpperCase()}`);
      const result = await running;
      expect(result.status, JSON.stringify(result.body)).to.equal(200);
      expect(result.body.result.stdout).to.equal('approved in words\n');
      await alice.waitFor(new RegExp(`^Approval ${code}: approved by irc:${alice.nick.toLowerCase()} \\(irc\\)`), { timeoutMs: 10_000 });

      expect(upstream.requests, 'no answer reached the agent').to.have.length(0);
      for (const user of [alice, bob]) {
        const session = await home.run(['sessions', 'show', `irc:default:dm:${user.nick.toLowerCase()}`, '--json']);
        expect(session.code === 0 ? JSON.stringify(session.json.messages) : '', 'no answer in a session').to.not.match(/approve/i);
      }
      const events = await audit(home);
      expect(events.find((event) => event.kind === 'exec.approved')).to.include({ actor: `irc:${alice.nick.toLowerCase()}` });
      expect(events.find((event) => event.kind === 'exec.approval.refused')).to.include({ actor: `irc:${bob.nick.toLowerCase()}` });
      // Any other words are a turn as before.
      upstream.enqueue(openaiText('Hello Bob.'));
      const before = bob.received.length;
      bob.say(nick, 'approve of this, gateway?');
      await bob.waitFor(/^Hello Bob\.$/, { after: before, timeoutMs: 20_000 });
    });

    it('ask: numbered options in words; the person\'s reply by number is the answer, and the run resumes with it', async () => {
      const dana = await IrcUser.connect(ircd.port, `dana${serial}`);
      const alice = await IrcUser.connect(ircd.port, `alice${serial}`);
      users.push(dana, alice);
      await startWith(alice);
      upstream.enqueue(openaiToolCalls([{ name: 'ask', args: { question: 'Which colour?', options: ['red', 'green', 'blue'] } }]), openaiText('Green it is.'));
      dana.say(nick, 'paint the shed');
      await dana.waitFor(/^Reply with a number, or in your own words\.$/, { timeoutMs: 20_000 });
      const lines = dana.received.map((message) => message.text);
      expect(lines).to.include.members(['Which colour?', '1. red', '2. green', '3. blue']);
      dana.say(nick, '2');
      await dana.waitFor(/^Green it is\.$/, { timeoutMs: 20_000 });
      const resumed = upstream.requests[1]!.body.messages as any[];
      const result = resumed.find((message) => message.role === 'tool');
      expect(JSON.parse(result.content)).to.include({ answer: 'green', option: 2, answeredBy: `irc:${dana.nick.toLowerCase()}` });
      expect(resumed.filter((message) => message.role === 'user').map((message) => message.content), 'the answer is no turn').to.deep.equal(['paint the shed']);
    });
  });

  describe('WhatsApp: interactive reply buttons and lists; a press is a message of its own, answered by a message', () => {
    let api: WhatsAppApi;
    let upstream: ScriptedUpstream;
    let home: Home;
    let base: string;
    const ops = '4915100000101';
    const sam = '4915100000102';
    const ida = '4915100000103';
    const dana = '4915100000104';
    /** An interactive message the business sent someone, whose body says `text`. */
    const interactiveTo = (to: string, text: string) => waitFor(() => api.interactives(to).find((call) => String(call.body.interactive.body.text).includes(text)), 30_000, `the buttons to ${to} for ${text}`);
    const textTo = (to: string, pattern: RegExp, after = 0) => waitFor(() => api.texts(to).slice(after).find((text) => pattern.test(text)), 30_000, `a message to ${to} matching ${pattern}`);

    const start = async (approvals: Record<string, unknown>) => {
      api = await new WhatsAppApi().start();
      upstream = await new ScriptedUpstream().start();
      upstream.responder = () => openaiText('Noted.');
      ({ home, base } = await askingHome({
        'models.providers.script': { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } },
        'agents.helper': { model: 'script/m', tools: ['ask'] },
        // Everyone may talk to the agent: a press must still never reach it.
        'channels.whatsapp': { enabled: true, agent: 'helper', apiRoot: api.apiRoot, phoneNumberId: api.phoneNumberId, reconnectMaxDelayMs: 2000, ackReaction: '', dmPolicy: 'open', allowFrom: ['*'] },
        approvals,
      }));
      for (const [name, value] of [['accessToken', api.accessToken], ['appSecret', api.appSecret], ['verifyToken', 'verify-approvals']] as const) {
        expect((await home.run(['secrets', 'set', `channels.whatsapp.${name}`], { input: value })).code).to.equal(0);
      }
      expect((await home.run(['start'])).code).to.equal(0);
      await waitFor(async () => ((await home.json(['channels', 'status'])).channels.find((c: any) => c.channel === 'whatsapp')?.state === 'connected' ? true : undefined), 20_000, 'the number to be checked');
      api.subscribe(`${base}/channels/whatsapp/default/webhook`);
    };
    /** People write first: their 24-hour windows are open, and the agent answers each. */
    const writeFirst = async (...people: string[]) => {
      for (const person of people) api.message(person, { text: 'hello' });
      for (const person of people) await textTo(person, /^Noted\.$/);
    };
    afterEach(async () => {
      home?.cleanup();
      await api?.stop();
      await upstream?.stop();
    });

    it('an approver\'s press runs the command; a non-approver\'s is refused and told; each chat is told who decided in a new message; a press posted again, and every press, is no turn', async () => {
      await start({ notify: [{ channel: 'whatsapp', to: `+${ops}` }, { channel: 'whatsapp', to: sam }], approvers: [`whatsapp:+${ops}`] });
      await writeFirst(ops, sam);
      const running = execOver(base, 'echo approved on whatsapp');
      const request = await interactiveTo(ops, 'echo approved on whatsapp');
      const toSam = await interactiveTo(sam, 'echo approved on whatsapp');
      const [pending] = (await home.json(['approvals', 'list'])).approvals;
      expect(request.body.interactive.type).to.equal('button');
      expect(request.body.interactive.body.text).to.include(`Approval ${pending.code}`).and.to.include(`reply "approve ${pending.code}"`);
      expect(request.body.interactive.action.buttons).to.deep.equal([
        { type: 'reply', reply: { id: `ap:y:${pending.id}`, title: 'Approve' } },
        { type: 'reply', reply: { id: `ap:n:${pending.id}`, title: 'Reject' } },
      ]);
      expect(pending.told.map((notice: any) => [notice.to, notice.status])).to.deep.equal([[`+${ops}`, 'sent'], [sam, 'sent']]);

      // Sam was told of it but is no approver: refused, told in a message, and nothing runs.
      api.press(sam, toSam, 'Approve', { name: 'Sam' });
      await textTo(sam, /^You are not one of this gateway's approvers/);
      expect((await home.json(['approvals', 'list'])).approvals.map((approval: any) => approval.id)).to.deep.equal([pending.id]);

      const seen = api.texts(ops).length;
      const press = api.press(ops, request, 'Approve', { name: 'Olga' });
      const result = await running;
      expect(result.status, JSON.stringify(result.body)).to.equal(200);
      expect(result.body.result.stdout).to.equal('approved on whatsapp\n');
      const outcome = new RegExp(`^Approval ${pending.code}: approved by whatsapp:${ops} \\(whatsapp\\): \`echo approved on whatsapp\`$`);
      await textTo(ops, outcome, seen);
      await textTo(sam, outcome);

      // Meta posts the press again (it thought it was not taken): acted on once, nothing said twice.
      api.again(press);
      await api.settled();
      await sleep(1500);
      expect(api.texts(ops).slice(seen), 'the approver hears the outcome, once').to.have.length(1);
      expect(api.interactives(ops), 'WhatsApp edits nothing').to.have.length(1);
      expect(upstream.requests, 'only the hellos reached the agent').to.have.length(2);
      for (const person of [ops, sam]) {
        const session = await home.json(['sessions', 'show', `whatsapp:default:dm:${person}`]);
        expect(session.messages.filter((m: any) => m.direction === 'in').map((m: any) => m.text), 'no press in a session').to.deep.equal(['hello']);
      }
      const events = await audit(home);
      const approved = events.filter((event) => event.kind === 'exec.approved' && event.subject === pending.id);
      expect(approved).to.have.length(1);
      expect(approved[0]).to.include({ actor: `whatsapp:${ops}` });
      expect(approved[0].detail).to.include({ via: 'whatsapp', command: 'echo approved on whatsapp' });
      expect(events.filter((event) => event.kind === 'exec.approval.refused' && event.subject === pending.id).map((event) => event.actor)).to.deep.equal([`whatsapp:${sam}`]);
    });

    it('the first answer wins: the CLI before the press, which is told who decided; a reject by press refuses the command', async () => {
      await start({ notify: [{ channel: 'whatsapp', to: ops }], approvers: [`whatsapp:${ops}`] });
      await writeFirst(ops);
      const running = execOver(base, 'echo first from the cli');
      const request = await interactiveTo(ops, 'echo first from the cli');
      const [pending] = (await home.json(['approvals', 'list'])).approvals;
      expect((await home.run(['approvals', 'approve', pending.code])).code).to.equal(0);
      expect((await running).body.result.stdout).to.equal('first from the cli\n');
      await textTo(ops, new RegExp(`^Approval ${pending.code}: approved by device:\\S+ \\(cli\\)`));
      api.press(ops, request, 'Reject');
      await textTo(ops, new RegExp(`^Approval ${pending.code} was already approved by device:\\S+ \\(cli\\); your answer changes nothing\\.$`));
      const decisions = (await audit(home)).filter((event) => (event.kind === 'exec.approved' || event.kind === 'exec.rejected') && event.subject === pending.id);
      expect(decisions.map((event) => [event.kind, event.detail.via])).to.deep.equal([['exec.approved', 'cli']]);

      const refused = execOver(base, 'touch rejected-on-whatsapp');
      const second = await interactiveTo(ops, 'touch rejected-on-whatsapp');
      api.press(ops, second, 'Reject');
      const outcome = await refused;
      expect(outcome.status).to.equal(403);
      await textTo(ops, /^Approval [0-9a-f]{4}: rejected by whatsapp:\d+ \(whatsapp\): `touch rejected-on-whatsapp`$/);
    });

    it('ask: up to three options as reply buttons, more as a list; the row picked answers, the person is told, and the run resumes with it', async () => {
      await start({});
      upstream.enqueue(
        openaiToolCalls([{ name: 'ask', args: { question: 'Deploy now?', options: ['Yes', 'No'] } }]), openaiText('Deploying.'),
        openaiToolCalls([{ name: 'ask', args: { question: 'Which colour?', options: ['Red', 'Green', 'Blue', 'Yellow', 'A shade of purple nobody has named yet'] } }]), openaiText('Purple it is.'),
      );
      api.message(dana, { text: 'deploy please' });
      const buttons = await interactiveTo(dana, 'Deploy now?');
      expect(buttons.body.interactive.type).to.equal('button');
      expect(buttons.body.interactive.action.buttons.map((button: any) => button.reply.title)).to.deep.equal(['Yes', 'No']);
      api.press(dana, buttons, 'Yes');
      await textTo(dana, /^Got it: Yes$/);
      await textTo(dana, /^Deploying\.$/);

      api.message(dana, { text: 'paint the shed' });
      const list = await interactiveTo(dana, 'Which colour?');
      expect(list.body.interactive.type).to.equal('list');
      const rows = list.body.interactive.action.sections[0].rows as any[];
      expect(rows.map((row) => row.title)).to.deep.equal(['Red', 'Green', 'Blue', 'Yellow', 'A shade of purple nobod…']);
      expect(rows[4].description).to.equal('A shade of purple nobody has named yet');
      const asked = upstream.requests.length;
      api.press(dana, list, 'A shade of purple nobod…');
      await textTo(dana, /^Got it: A shade of purple nobody has named yet$/);
      await textTo(dana, /^Purple it is\.$/);
      const resumed = upstream.requests[asked]!.body.messages as any[];
      const result = resumed.filter((message) => message.role === 'tool').at(-1);
      expect(JSON.parse(result.content)).to.include({ answer: 'A shade of purple nobody has named yet', option: 5, answeredBy: `whatsapp:${dana}` });
      expect(resumed.filter((message) => message.role === 'user').map((message) => message.content), 'no press is a turn').to.deep.equal(['deploy please', 'paint the shed']);
    });

    it('outside the 24-hour window: without a template the request is recorded as not told, with the reason; with one, it waits for the approver\'s answer to the template, then goes with its buttons', async () => {
      await start({ notify: [{ channel: 'whatsapp', to: ida }], approvers: [`whatsapp:${ida}`] });
      const first = execOver(base, 'echo never told');
      const notTold = await waitFor(async () => {
        const [approval] = (await home.json(['approvals', 'list'])).approvals;
        return approval?.told?.[0]?.status === 'failed' ? approval : undefined;
      }, 30_000, 'the request recorded as not told');
      expect(notTold.told[0].error).to.include('outside WhatsApp\'s 24-hour customer service window').and.to.include(`${ida} has not written to this number in the last 24 hours`)
        .and.to.include('channels.whatsapp.template is not set; not sent');
      expect((await home.run(['approvals', 'list'])).stdout).to.include(`${notTold.code}: whatsapp ${ida} was not told: outside WhatsApp's 24-hour customer service window`);
      expect(api.sent(ida), 'nothing free-form went out').to.deep.equal([]);

      await home.set('channels.whatsapp.template', { name: 'welcome_back', language: 'en_US' });
      const second = execOver(base, 'echo after the template');
      const invite = await waitFor(() => api.sent(ida).find((call) => call.body.type === 'template'), 30_000, 'the template');
      const waiting = await waitFor(async () => {
        const approval = (await home.json(['approvals', 'list'])).approvals.find((candidate: any) => candidate.command === 'echo after the template');
        return approval?.told?.[0]?.status === 'pending' && approval.told[0].error ? approval : undefined;
      }, 30_000, 'the request waiting');
      expect(waiting.told[0].error).to.include('the template welcome_back was sent at').and.to.include(`waits for ${ida} to answer it`);
      expect(api.interactives(ida)).to.deep.equal([]);

      api.message(ida, { raw: { type: 'button', button: { text: 'Show me', payload: 'show' }, context: { from: api.metadata().display_phone_number, id: invite.answer.messages[0].id } } });
      const request = await waitFor(() => api.interactives(ida).find((call) => String(call.body.interactive.body.text).includes('echo after the template')), 60_000, 'the request with its buttons');
      api.press(ida, request, 'Approve');
      expect((await second).body.result.stdout).to.equal('after the template\n');
      expect((await home.run(['approvals', 'reject', notTold.id])).code).to.equal(0);
      expect((await first).status).to.equal(403);
    });
  });

  describe('ask: the run waits in the store, not in a run slot, and resumes once', () => {
    let api: TelegramApi;
    let home: Home;
    let upstream: ScriptedUpstream;
    const dan: TgUser = { id: 4_200_001, first_name: 'Dan', username: 'dan_d' };
    const eve: TgUser = { id: 4_200_002, first_name: 'Eve', username: 'eve_e' };
    const dmOf = (user: TgUser): TgChat => ({ id: user.id, type: 'private', first_name: user.first_name });
    const say = (user: TgUser, text: string) => api.message(TG_TOKEN, { chat: dmOf(user), from: user, text });
    const texts = (user: TgUser) => api.sent(user.id).map((request) => String(request.body.text));
    const connected = () => waitFor(async () => ((await home.json(['channels', 'status'])).channels.find((c: any) => c.channel === 'telegram')?.state === 'connected' ? true : undefined), 20_000, 'the bot to connect');

    beforeEach(async () => {
      api = await new TelegramApi().start();
      api.addBot(TG_TOKEN, 'gw_ask_bot');
      upstream = await new ScriptedUpstream().start();
      home = new Home({ GATEWAY_PORT: String(await freePort()) });
      await home.set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
      await home.set('agents.helper', { model: 'script/m', tools: ['ask'] });
      // One run with tools at a time: a run waiting for its answer must not hold it.
      await home.set('runtime.toolRunConcurrency', 1);
      await home.set('channels.telegram', { enabled: true, apiRoot: api.apiRoot, reconnectMaxDelayMs: 2000, agent: 'helper', dmPolicy: 'open', allowFrom: ['*'] });
      expect((await home.run(['secrets', 'set', 'channels.telegram.botToken'], { input: TG_TOKEN })).code).to.equal(0);
      expect((await home.run(['start'])).code).to.equal(0);
      await connected();
    });
    afterEach(async () => {
      home.cleanup();
      await api.stop();
      await upstream.stop();
    });

    it('asks with buttons; another person is answered meanwhile; across a kill -9 the button\'s answer resumes the run once', async () => {
      upstream.enqueue(openaiToolCalls([{ name: 'ask', args: { question: 'Deploy to production now?', options: ['Yes', 'No'], default: 'No' } }]));
      say(dan, 'please deploy');
      const question = await waitFor(() => api.sent(dan.id).find((sent) => sent.body.reply_markup), 20_000, 'the question');
      expect(String(question.body.text)).to.match(/^Deploy to production now\?\n\(If I hear nothing by \d\d:\d\d UTC, I will go with: No\.\)$/);
      const keys = (question.body.reply_markup.inline_keyboard as any[]).flat();
      expect(keys.map((key) => key.text)).to.deep.equal(['Yes', 'No']);

      // The run that asked has ended: Eve's run takes the only tool-run slot, and is answered.
      upstream.enqueue(openaiText('Hi Eve.'));
      say(eve, 'hello');
      await waitFor(() => texts(eve).find((text) => text === 'Hi Eve.'), 20_000, 'Eve\'s answer while Dan\'s question waits');
      const session = await home.json(['sessions', 'show', `telegram:default:dm:${dan.id}`]);
      expect(session.messages.filter((m: any) => m.kind === 'tool_call').map((m: any) => m.data.name)).to.deep.equal(['ask']);
      expect(session.messages.some((m: any) => m.kind === 'tool_result'), 'no result yet').to.equal(false);

      process.kill(home.lock().pid, 'SIGKILL');
      await sleep(500);
      expect((await home.run(['start'])).code).to.equal(0);
      await connected();

      upstream.enqueue(openaiText('Deploying now.'));
      const asked = upstream.requests.length;
      const query = api.press(TG_TOKEN, { from: dan, chat: dmOf(dan), messageId: Number(question.result.message_id), data: keys[0].callback_data });
      expect((await waitFor(() => api.answers(query)[0], 20_000, 'the toast')).body.text).to.equal('Got it: Yes');
      await waitFor(() => texts(dan).find((text) => text === 'Deploying now.'), 20_000, 'the resumed run\'s answer');
      const resumed = upstream.requests[asked]!.body.messages as any[];
      const call = resumed.find((message) => message.role === 'assistant' && message.tool_calls)?.tool_calls[0];
      expect(call.function.name).to.equal('ask');
      const result = resumed.find((message) => message.role === 'tool' && message.tool_call_id === call.id);
      expect(JSON.parse(result.content)).to.include({ answer: 'Yes', option: 1, answeredBy: `telegram:${dan.id}` });
      await waitFor(() => api.sent(dan.id, ['editMessageText']).find((sent) => String(sent.body.text).endsWith('(Answered: Yes)') && !sent.body.reply_markup), 10_000, 'the question edited');

      // Pressed again (or the press delivered again): nothing resumes twice.
      const again = api.press(TG_TOKEN, { from: dan, chat: dmOf(dan), messageId: Number(question.result.message_id), data: keys[1].callback_data });
      expect((await waitFor(() => api.answers(again)[0])).body.text).to.equal('Already answered: Yes');
      await sleep(1500);
      expect(texts(dan).filter((text) => text === 'Deploying now.'), 'answered once').to.have.length(1);
      expect(upstream.requests.length, 'resumed once').to.equal(asked + 1);
    });

    it('with no answer in time, the run resumes with the stated default, and the person is told', async () => {
      await home.set('tools.ask.timeoutSeconds', 5);
      upstream.enqueue(openaiToolCalls([{ name: 'ask', args: { question: 'Keep the old logs?', options: ['Keep', 'Delete'], default: 'Keep' } }]), openaiText('Kept them.'));
      say(dan, 'clean up');
      await waitFor(() => api.sent(dan.id).find((sent) => sent.body.reply_markup), 20_000, 'the question');
      await waitFor(() => texts(dan).find((text) => text === 'Kept them.'), 30_000, 'the run resumed by the timeout');
      const result = (upstream.requests[1]!.body.messages as any[]).find((message) => message.role === 'tool');
      expect(JSON.parse(result.content)).to.include({ answer: 'Keep', timedOut: true });
      await waitFor(() => api.sent(dan.id, ['editMessageText']).find((sent) => String(sent.body.text).endsWith('(No answer in time; I went with: Keep.)')), 10_000, 'the question edited');
    });
  });

  describe('budgets: the operator\'s chats told once, the person told plainly', () => {
    it('a cap reached is told to approvals.notify once, and the person whose run is refused hears why', async () => {
      const api = await new TelegramApi().start();
      const upstream = await new ScriptedUpstream().start();
      const home = new Home({ GATEWAY_PORT: String(await freePort()) });
      const ops: TgChat = { id: 4_300_009, type: 'private', first_name: 'Olga' };
      const fay: TgUser = { id: 4_300_001, first_name: 'Fay' };
      try {
        api.addBot(TG_TOKEN, 'gw_budget_bot');
        api.openChat(ops);
        // 10 EUR a million tokens in and out: 100,000 in and 20,000 out cost 1.20 EUR, past the 1 EUR cap.
        await home.set('models', { currency: 'EUR', providers: { script: { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 }, prices: { m: { input: 10, output: 10 } } } } });
        await home.set('agents.helper', { model: 'script/m', budget: { daily: 1 } });
        await home.set('channels.telegram', { enabled: true, apiRoot: api.apiRoot, agent: 'helper', dmPolicy: 'open', allowFrom: ['*'] });
        await home.set('approvals.notify', [{ channel: 'telegram', to: String(ops.id) }]);
        expect((await home.run(['secrets', 'set', 'channels.telegram.botToken'], { input: TG_TOKEN })).code).to.equal(0);
        expect((await home.run(['start'])).code).to.equal(0);
        const dm = { id: fay.id, type: 'private' as const, first_name: fay.first_name };
        upstream.enqueue(openaiText('First answer.', { prompt_tokens: 100_000, completion_tokens: 20_000 }));
        api.message(TG_TOKEN, { chat: dm, from: fay, text: 'one' });
        await waitFor(() => api.sent(fay.id).find((sent) => sent.body.text === 'First answer.'), 20_000, 'the first answer');
        const asked = upstream.requests.length;
        api.message(TG_TOKEN, { chat: dm, from: fay, text: 'two' });
        const refusal = await waitFor(() => api.sent(fay.id).find((sent) => String(sent.body.text).startsWith('Sorry, I cannot answer now')), 20_000, 'the person told');
        expect(String(refusal.body.text)).to.match(/I have reached the spending limit my operator set, until \d{4}-\d\d-\d\d 00:00 UTC\. The operator has been told\.$/);
        expect(upstream.requests.length, 'the model was not called').to.equal(asked);
        api.message(TG_TOKEN, { chat: dm, from: fay, text: 'three' });
        await waitFor(() => (api.sent(fay.id).filter((sent) => String(sent.body.text).startsWith('Sorry, I cannot answer now')).length === 2 ? true : undefined), 20_000, 'the second refusal');
        const toOps = () => api.sent(ops.id).map((sent) => String(sent.body.text)).filter((text) => text.startsWith('Agent helper reached its daily budget'));
        await waitFor(() => toOps()[0], 10_000, 'the operator told');
        await sleep(1000);
        expect(toOps(), 'told once').to.have.length(1);
      } finally {
        home.cleanup();
        await api.stop();
        await upstream.stop();
      }
    });
  });

  describe('two daemons on one PostgreSQL', () => {
    it('a command waiting on one daemon is decided from the other (the CLI, or the chat the other runs), once', async function () {
      this.timeout(150_000);
      const pg = await sharedPostgres(freePort);
      const url = pg.createDatabase();
      const api = await new TelegramApi().start();
      const ops: TgUser = { id: 4_400_001, first_name: 'Olga' };
      const opsChat: TgChat = { id: ops.id, type: 'private', first_name: 'Olga' };
      const nodes: { home: Home; base: string }[] = [];
      try {
        api.addBot(TG_TOKEN, 'gw_cluster_bot');
        api.openChat(opsChat);
        for (let n = 0; n < 2; n++) {
          const node = await askingHome({
            'channels.telegram': { enabled: true, apiRoot: api.apiRoot, reconnectMaxDelayMs: 1000 },
            approvals: { notify: [{ channel: 'telegram', to: String(ops.id) }], approvers: [`telegram:${ops.id}`] },
          }, { GATEWAY_STORE_URL: url });
          expect((await node.home.run(['secrets', 'set', 'channels.telegram.botToken'], { input: TG_TOKEN })).code).to.equal(0);
          nodes.push(node);
        }
        for (const node of nodes) expect((await node.home.run(['start'])).code).to.equal(0);
        const [a, b] = nodes as [{ home: Home; base: string }, { home: Home; base: string }];

        // Waiting on a, approved from b's CLI.
        const first = execOver(a.base, 'echo decided elsewhere');
        const pending = await waitFor(async () => (await b.home.json(['approvals', 'list'])).approvals[0], 20_000, 'b to list a\'s request');
        expect((await b.home.run(['approvals', 'approve', pending.id])).code).to.equal(0);
        expect((await first).body.result.stdout).to.equal('decided elsewhere\n');

        // Waiting on b, pressed in the chat (whichever daemon runs Telegram), while a's CLI rejects: one decision.
        const second = execOver(b.base, 'echo pressed in the chat');
        const request = await waitFor(() => api.sent(ops.id).find((sent) => String(sent.body.text).includes('echo pressed in the chat') && sent.body.reply_markup), 30_000, 'the request');
        const data = (request.body.reply_markup.inline_keyboard as any[]).flat().find((key) => key.text === 'Approve').callback_data;
        const id = String(data).slice(5);
        const [cli] = await Promise.all([a.home.run(['approvals', 'reject', id]), Promise.resolve(api.press(TG_TOKEN, { from: ops, chat: opsChat, messageId: Number(request.result.message_id), data }))]);
        const outcome = await second;
        const decisions = (await a.home.json(['audit', '--limit', '200'])).events.filter((event: any) => (event.kind === 'exec.approved' || event.kind === 'exec.rejected') && event.subject === id);
        expect(decisions, 'decided once across the daemons').to.have.length(1);
        expect(outcome.status).to.equal(decisions[0].kind === 'exec.approved' ? 200 : 403);
        expect(cli.code).to.equal(decisions[0].kind === 'exec.rejected' ? 0 : 1);
      } finally {
        for (const node of nodes) {
          await node.home.run(['stop']);
          node.home.cleanup();
        }
        await api.stop();
      }
    });
  });
});
