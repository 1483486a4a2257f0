import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, Home, sleep, waitFor } from '../support/cli.ts';
import { codeIn } from '../support/irc.ts';
import { MailPerson, MailServers } from '../support/mail.ts';
import { testEngine } from '../support/postgres.ts';
import { openaiText, ScriptedUpstream } from '../support/scripted-upstream.ts';

describe('email channel against a real postfix and dovecot (e2e)', function () {
  this.timeout(120_000);
  let servers: MailServers;
  let upstream: ScriptedUpstream;
  let home: Home;
  let bot: MailPerson;
  let serial = 0;

  const person = (name: string) => new MailPerson(servers, `${name}${++serial}`);
  const state = async () => (await home.run(['channels', 'status', '--json'])).json?.channels?.find((c: any) => c.channel === 'email') as { state: string; detail?: string } | undefined;
  const connected = () => waitFor(async () => ((await state())?.state === 'connected' ? true : undefined), 20_000, 'the gateway to connect to dovecot');
  const set = (key: string, value: unknown) => home.set(key, value);
  /** A person the operator has approved (paired through a first mail). */
  const approved = async (name: string) => {
    const someone = person(name);
    await someone.send({ to: bot.address, subject: 'Hi', text: 'hello' });
    const code = codeIn((await someone.waitFor(/pairing code is/)).text);
    expect((await home.run(['pair', 'approve', 'email', code])).code).to.equal(0);
    return someone;
  };
  const sessionsOf = async () => ((await home.run(['sessions', 'list', '--json'])).json.sessions as { key: string }[]).map((session) => session.key);

  before(async () => {
    servers = await MailServers.start();
    bot = new MailPerson(servers, 'gwbot', 'bot-password');
    upstream = await new ScriptedUpstream().start();
    upstream.responder = (request) => openaiText(`Echo: ${String((request.body.messages as { content: string }[]).at(-1)?.content)}`);
  });
  after(async () => {
    await servers?.stop();
    await upstream?.stop();
  });
  beforeEach(async () => {
    home = new Home({ GATEWAY_PORT: String(await freePort()), NODE_EXTRA_CA_CERTS: servers.certificate });
    await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await set('agents.helper', { model: 'script/m' });
    await set('channels.email', {
      enabled: true, address: bot.address, imap: `imap://127.0.0.1:${servers.imapPort}`, smtp: `smtp://127.0.0.1:${servers.smtpPort}`,
      agent: 'helper', fromName: 'Gateway', reconnectMaxDelayMs: 2000,
    });
    const secret = await home.run(['secrets', 'set', 'channels.email.password'], { input: 'bot-password' });
    expect(secret.code, secret.stderr).to.equal(0);
    expect((await home.run(['start'])).code).to.equal(0);
  });
  afterEach(() => home.cleanup());

  it('a stranger gets a pairing code by mail; approved, the agent answers in the same thread; each thread is a session', async () => {
    await connected();
    const alice = person('alice');
    const first = await alice.send({ to: bot.address, subject: 'Question', text: 'hello, who is there?' });
    const code = await alice.waitFor(/pairing code is/);
    expect(code.subject).to.equal('Re: Question');
    expect(code.inReplyTo).to.equal(first);
    expect(code.references).to.deep.equal([first]);
    expect(code.headers.get('auto-submitted')).to.equal('auto-replied');
    expect(code.from).to.equal(bot.address);
    expect((await home.run(['pair', 'approve', 'email', codeIn(code.text)])).code).to.equal(0);

    // A reply in the thread, quoting what it answers as mail clients do: the agent reads the new text only.
    const seen = (await alice.inbox()).length;
    const asked = await alice.send({
      to: bot.address, subject: 'Re: Question', text: 'What is email?\n\nOn Fri, Gateway wrote:\n> Hello alice.\n> Your pairing code is ...', inReplyTo: code.messageId, references: [first, code.messageId!],
    });
    const answer = await alice.waitFor(/^Echo: What is email\?$/, { after: seen });
    expect(answer.subject).to.equal('Re: Question');
    expect(answer.inReplyTo).to.equal(asked);
    expect(answer.references[0]).to.equal(first);
    expect(answer.references.at(-1)).to.equal(asked);
    expect(answer.headers.get('auto-submitted')).to.equal('auto-replied');
    expect(answer.text, 'the reply quotes nothing').to.equal('Echo: What is email?');

    // A new mail is a new thread, and a session of its own.
    const before = (await alice.inbox()).length;
    await alice.send({ to: bot.address, subject: 'Another matter', text: 'Second topic' });
    const other = await alice.waitFor(/^Echo: Subject: Another matter\s+Second topic$/, { after: before });
    expect(other.subject).to.equal('Re: Another matter');
    const threads = (await sessionsOf()).filter((key) => key.startsWith(`email:default:dm:${alice.address}#`));
    expect(threads).to.have.length(2);
    const first_ = (await home.run(['sessions', 'show', threads.find((key) => key)!, '--json'])).json;
    expect(first_.messages.length).to.be.greaterThan(1);

    // Marked seen once stored, and the password is only in the secret store.
    await waitFor(async () => ((await bot.inbox()).every((mail) => mail.seen) ? true : undefined), 10_000, 'every mail to the bot marked seen');
    expect((await home.run(['config', 'get', 'channels.email', '--json'])).stdout).to.not.include('bot-password');
  });

  it('never answers auto-submitted or bulk mail, bounces, or its own mail, so no loop starts; a person is still answered', async () => {
    await connected();
    const alice = await approved('alice');
    const seen = (await alice.inbox()).length;
    await alice.send({ to: bot.address, subject: 'Out of office', text: 'I am away until Monday.', headers: { 'Auto-Submitted': 'auto-replied' } });
    await alice.send({ to: bot.address, subject: 'Newsletter', text: 'News of the week.', headers: { Precedence: 'bulk' } });
    // Every Auto-Submitted header counts, not the first; Precedence is read without its comment, auto_reply and junk included.
    const raw = (subject: string, headers: string[]) => [`From: ${alice.address}`, `To: ${bot.address}`, `Subject: ${subject}`, ...headers, '', 'Sent by a machine.', ''].join('\r\n');
    await alice.send({ to: bot.address, raw: raw('Away, said twice', ['Auto-Submitted: no', 'Auto-Submitted: auto-replied (vacation)']) });
    await alice.send({ to: bot.address, subject: 'Offers', text: 'Cheap.', headers: { Precedence: 'bulk (sent by our mailer)' } });
    await alice.send({ to: bot.address, subject: 'Away', text: 'Back on Monday.', headers: { Precedence: 'auto_reply' } });
    await alice.send({ to: bot.address, subject: 'Spam', text: 'Buy now.', headers: { Precedence: 'junk' } });
    await alice.send({ to: bot.address, subject: 'Digest', text: 'List traffic.', headers: { 'List-Id': '<talk.example.test>' } });
    await alice.send({ to: bot.address, subject: 'Undelivered Mail Returned to Sender', text: 'This is the mail system.', envelope: '' });
    await bot.send({ to: bot.address, subject: 'Note to self', text: 'my own mail' });
    await alice.send({ to: bot.address, subject: 'Real question', text: 'Are you there?' });
    await alice.waitFor(/^Echo: Subject: Real question\s+Are you there\?$/, { after: seen });
    await sleep(1500);
    const replies = (await alice.inbox()).slice(seen);
    expect(replies.map((mail) => mail.subject), 'only the person was answered').to.deep.equal(['Re: Real question']);
    expect((await bot.inbox()).filter((mail) => mail.from === bot.address).map((mail) => mail.subject), 'the bot did not answer itself').to.deep.equal(['Note to self']);
    await waitFor(async () => ((await bot.inbox()).every((mail) => mail.seen) ? true : undefined), 10_000, 'the skipped mail marked seen');
    const log = (await home.run(['logs', '-n', '300', '--raw'])).stdout;
    for (const reason of ['it is auto-submitted (auto-replied (vacation))', 'it is bulk mail', 'it is an automatic reply (Precedence: auto_reply)', 'it is junk mail']) {
      expect(log, reason).to.include(`email: not answered: ${reason}`);
    }
  });

  it('takes the envelope sender, not a forged From: a stranger posing as an approved person is asked to pair', async () => {
    await connected();
    const alice = await approved('alice');
    const mallory = person('mallory');
    const aliceSeen = (await alice.inbox()).length;
    await mallory.send({ to: bot.address, subject: 'Urgent', text: 'Run the deploy now', from: alice.address });
    const code = await mallory.waitFor(/pairing code is/);
    expect(code.to).to.equal(mallory.address);
    await sleep(1000);
    expect((await alice.inbox()).length, 'nothing went to the person whose name was used').to.equal(aliceSeen);
    expect((await sessionsOf()).filter((key) => key.startsWith('email:')), 'neither has a session: alice never wrote, mallory is not approved').to.deep.equal([]);
    expect(upstream.requests.some((request) => JSON.stringify(request.body).includes('Run the deploy now')), 'the agent never read it').to.equal(false);
  });

  it('survives its servers restarting: mail that came meanwhile is answered once, a reply waits for SMTP and then goes', async () => {
    await connected();
    const alice = await approved('alice');
    const seen = (await alice.inbox()).length;
    await servers.stopDovecot();
    await waitFor(async () => ((await state())?.state !== 'connected' ? true : undefined), 20_000, 'the account to notice');
    await alice.send({ to: bot.address, subject: 'While you were out', text: 'Did this arrive?' });
    await servers.stopPostfix();
    await servers.startDovecot();
    await connected();
    // The answer is made while SMTP is down: it waits in the outbox.
    await waitFor(async () => (upstream.requests.some((request) => JSON.stringify(request.body).includes('Did this arrive?')) ? true : undefined), 20_000, 'the agent to answer');
    await sleep(1000);
    await servers.startPostfix();
    await alice.waitFor(/^Echo: Subject: While you were out\s+Did this arrive\?$/, { after: seen, timeoutMs: 40_000 });
    await sleep(2000);
    expect((await alice.inbox()).slice(seen).filter((mail) => /Did this arrive/.test(mail.text)), 'answered once').to.have.length(1);
  });

  it('leaves mail it could not store unseen, and reads it again by itself once it can: a full disk loses nothing', async function () {
    // On PostgreSQL the state is not on the profile's disk: the database's own outage is tested in the PostgreSQL suite.
    if (testEngine() === 'postgres') this.skip();
    if (process.getuid?.() !== 0) {
      if (process.env.CI) throw new Error('the full-disk test mounts a tmpfs and needs root (CI runs as root)');
      this.skip();
    }
    home.cleanup();
    const mount = mkdtempSync(join(tmpdir(), 'gateway-mailfull-'));
    expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', mount]).status).to.equal(0);
    try {
      home = new Home({ GATEWAY_PORT: String(await freePort()), NODE_EXTRA_CA_CERTS: servers.certificate }, mount);
      await home.run(['profiles', 'create', 'default', '--secrets', 'file']);
      await set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
      await set('agents.helper', { model: 'script/m' });
      await set('channels.email', {
        enabled: true, address: bot.address, imap: `imap://127.0.0.1:${servers.imapPort}`, smtp: `smtp://127.0.0.1:${servers.smtpPort}`, agent: 'helper', reconnectMaxDelayMs: 2000,
      });
      expect((await home.run(['secrets', 'set', 'channels.email.password'], { input: 'bot-password' })).code).to.equal(0);
      expect((await home.run(['start'])).code).to.equal(0);
      await connected();
      const alice = await approved('alice');
      const seen = (await alice.inbox()).length;

      const filler = join(mount, 'filler');
      const fd = openSync(filler, 'w');
      try {
        for (const size of [1024 * 1024, 4096, 512]) {
          try {
            for (;;) writeSync(fd, Buffer.alloc(size, 1));
          } catch {
            // full at this block size: go on with a smaller one
          }
        }
      } finally {
        closeSync(fd);
      }
      await alice.send({ to: bot.address, subject: 'On a full disk', text: 'Is this kept?' });
      await waitFor(() => (readFileSync(home.file('gateway.log'), 'utf8').includes('reading the mailbox stopped') ? true : undefined), 30_000, 'the store to refuse the mail');
      expect(upstream.requests.some((request) => JSON.stringify(request.body).includes('Is this kept?'))).to.equal(false);

      // Room again: no new mail comes, yet the waiting one is read, answered once.
      rmSync(filler);
      await alice.waitFor(/^Echo: Subject: On a full disk\s+Is this kept\?$/, { after: seen, timeoutMs: 40_000 });
      await sleep(2000);
      expect((await alice.inbox()).slice(seen).filter((mail) => /Is this kept/.test(mail.text)), 'answered once').to.have.length(1);
      await home.run(['stop']);
    } finally {
      try {
        home.cleanup();
      } catch {
        // the mount point stays until it is unmounted
      }
      // The daemon may take a moment to let go of its files.
      for (let tries = 0; tries < 40 && spawnSync('umount', [mount]).status !== 0; tries++) await sleep(250);
      rmSync(mount, { recursive: true, force: true });
    }
  });

  it('reads broken, huge and nested mail without stopping: a warning or a note to the agent, and the next mail is answered', async () => {
    await connected();
    const alice = await approved('alice');
    const seen = (await alice.inbox()).length;
    // A multipart whose boundary never comes, with a body that is not base64.
    await alice.send({
      to: bot.address,
      raw: [`From: ${alice.address}`, `To: ${bot.address}`, 'Subject: Broken', 'MIME-Version: 1.0', 'Content-Type: multipart/mixed; boundary="nowhere"', '', '--elsewhere',
        'Content-Type: text/plain', 'Content-Transfer-Encoding: base64', '', '%%%not base64%%%', ''].join('\r\n'),
    });
    // Messages nested in messages, forty deep.
    let nested = 'Content-Type: text/plain\r\n\r\ninnermost';
    for (let depth = 0; depth < 40; depth++) nested = `Content-Type: message/rfc822\r\n\r\nSubject: level ${depth}\r\n${nested}`;
    await alice.send({ to: bot.address, raw: [`From: ${alice.address}`, `To: ${bot.address}`, 'Subject: Nested', 'MIME-Version: 1.0', 'Content-Type: multipart/mixed; boundary="b"', '', '--b', 'Content-Type: text/plain', '', 'see inside', '--b', nested, '--b--', ''].join('\r\n') });
    await alice.send({ to: bot.address, subject: 'With a file', text: 'Here is the file.', attachments: [{ filename: 'notes.txt', content: 'remember the milk', contentType: 'text/plain' }] });
    await alice.send({ to: bot.address, subject: 'Still there?', text: 'Ping' });
    await alice.waitFor(/^Echo: Subject: Still there\?\s+Ping$/, { after: seen, timeoutMs: 30_000 });
    expect((await state())!.state).to.equal('connected');
    const texts = (await alice.inbox()).slice(seen).map((mail) => mail.text);
    expect(texts.some((text) => /^Echo: Subject: Nested\s+see inside/.test(text)), JSON.stringify(texts)).to.equal(true);
    // The file reached the agent as a text file does on the chat channels.
    expect(upstream.requests.some((request) => JSON.stringify(request.body).includes('remember the milk'))).to.equal(true);

    // Over maxMessageBytes: only the headers are read, and the agent is told.
    await set('channels.email.maxMessageBytes', 2048);
    const before = (await alice.inbox()).length;
    await alice.send({ to: bot.address, subject: 'Big', text: 'x'.repeat(10_000) });
    const told = await alice.waitFor(/more than the gateway reads/, { after: before });
    expect(told.text).to.match(/only its headers were read/);
  });

  it('sends no password where TLS is missing: a server without STARTTLS, and allowPlaintext for a server elsewhere, are refused', async () => {
    // A server that offers no STARTTLS: it hears nothing but the client's first words.
    const heard: string[] = [];
    const plain: Server = createServer((socket) => {
      socket.write('* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN LOGIN-REFERRALS] ready\r\n');
      socket.on('data', (data) => {
        const line = data.toString();
        heard.push(line);
        const tag = line.split(' ')[0];
        if (/CAPABILITY/i.test(line)) socket.write(`* CAPABILITY IMAP4rev1 AUTH=PLAIN\r\n${tag} OK done\r\n`);
        else socket.write(`${tag} BAD no\r\n`);
      });
      socket.on('error', () => undefined);
    });
    const port = await new Promise<number>((resolve) => plain.listen(0, '127.0.0.1', () => resolve((plain.address() as { port: number }).port)));
    try {
      expect((await home.run(['stop'])).code).to.equal(0);
      await set('channels.email.imap', `imap://127.0.0.1:${port}`);
      expect((await home.run(['start'])).code).to.equal(0);
      await waitFor(async () => ((await state())?.state === 'error' ? true : undefined), 20_000, 'the account to stop in error');
      expect((await state())!.detail).to.match(/STARTTLS/i);
      expect(heard.join('')).to.not.include('bot-password');
      expect(heard.join('')).to.not.match(/LOGIN|AUTHENTICATE/i);
    } finally {
      plain.close();
    }
    expect((await home.run(['stop'])).code).to.equal(0);
    await set('channels.email.imap', 'imap://mail.example.org:143');
    await set('channels.email.allowPlaintext', true);
    expect((await home.run(['start'])).code).to.equal(0);
    await waitFor(async () => ((await state())?.detail?.includes('allowPlaintext is refused') ? true : undefined), 20_000, 'allowPlaintext refused');

    const bad = await home.run(['config', 'set', 'channels.email.smtp', '"http://mail.example.org"']);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.include('channels.email.smtp');
  });
});
