import { expect } from 'chai';
import { DESKTOP, PHONE, screenshot, TestBrowser } from '../support/browser.ts';
import { freePort, Home } from '../support/cli.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

describe('the Control UI shows agents with their routes and skills, and a session\'s delegation tree (e2e, in Chromium)', function () {
  this.timeout(120_000);
  let browser: TestBrowser;
  let home: Home;
  let base: string;
  let script: ScriptedUpstream;

  before(async function () {
    if (!TestBrowser.available()) {
      if (process.env.CI) throw new Error('the Control UI tests need Chromium at /usr/bin/chromium (apt-get install chromium)');
      this.skip();
    }
    [browser, script] = await Promise.all([TestBrowser.launch(), new ScriptedUpstream().start()]);
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    await home.set('models.providers.script', { kind: 'openai-compatible', baseUrl: script.url, models: ['m'], retries: { max: 0 } });
    await home.set('agents', {
      lead: { model: 'script/m', delegation: { agents: ['scout'] }, skills: ['*'] },
      scout: { model: 'script/m', skills: ['weather-report'], delegation: { agents: ['lead'] } },
    });
    await home.set('channels.irc', { enabled: false, host: '127.0.0.1', nick: 'gw', agent: 'lead', routes: [{ match: { room: '#field' }, agent: 'scout' }] });
    const started = await home.run(['start']);
    expect(started.code, started.stderr).to.equal(0);
  });
  after(async () => {
    await browser?.close();
    home?.cleanup();
    await script?.stop();
  });

  async function signedIn(viewport = DESKTOP) {
    const dashboard = await home.run(['dashboard', '--invite', '--no-browser', '--json']);
    expect(dashboard.code, dashboard.stderr).to.equal(0);
    const opened = await browser.page(viewport);
    await opened.page.goto(dashboard.json.invite.url);
    await opened.page.getByRole('status').filter({ hasText: 'Connected' }).waitFor();
    return opened;
  }

  it('the Agents page lists each agent with whom it answers, its skills and whom it may delegate to', async () => {
    const { page, context, problems } = await signedIn();
    await page.goto(`${base}/#/agents`);
    const row = (id: string) => page.getByTestId('agent').filter({ has: page.getByRole('rowheader', { name: new RegExp(`^${id}( \\(default\\))?$`) }) });
    const scout = row('scout');
    await scout.waitFor();
    expect(await scout.getByTestId('agent-routes').textContent()).to.match(/irc: room #field\s+\(route 1\)/);
    expect(await scout.getByTestId('agent-skills').textContent()).to.equal('weather-report');
    const lead = row('lead');
    expect(await lead.getByTestId('agent-routes').textContent()).to.include('irc: everyone else');
    expect(await lead.getByTestId('agent-skills').textContent()).to.equal('every installed skill');
    expect(await lead.getByTestId('agent-delegates').textContent()).to.equal('scout');
    await screenshot(page, 'agents-desktop');
    expect(problems.console).to.deep.equal([]);
    await context.close();
  });

  it('a session page shows the tree of the tasks it delegated, each opening its child\'s session', async () => {
    script.enqueue(
      openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'scout', task: 'Scout the northern pass.' } }]),
      // The scout hands part of it back to the lead: a second level of the tree.
      openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'lead', task: 'Check the maps of the pass.' } }]),
      openaiText('The maps show a clear path.'),
      openaiText('The pass is clear.'),
      openaiText('Scouted: the pass is clear.'),
    );
    const chat = await home.run(['chat', '--agent', 'lead', '--session', 'expedition', 'Is the northern pass clear?', '--json']);
    expect(chat.code, chat.stderr).to.equal(0);
    expect(chat.json.text).to.equal('Scouted: the pass is clear.');
    for (const viewport of [DESKTOP, PHONE]) {
      const { page, context, problems } = await signedIn(viewport);
      await page.goto(`${base}/#/sessions`);
      // A child's session is listed by the agent that does the task and the one that gave it.
      await page.getByRole('button', { name: 'scout: a task from lead' }).waitFor();
      await page.getByRole('button', { name: 'lead: a task from scout' }).waitFor();
      await page.getByRole('button', { name: 'expedition' }).click();
      const tree = page.getByTestId('delegations');
      await tree.waitFor();
      const nodes = tree.getByTestId('delegation');
      expect(await nodes.count()).to.equal(2);
      expect(await nodes.nth(0).textContent()).to.include('scout').and.to.include('succeeded').and.to.include('Scout the northern pass.');
      expect(await nodes.nth(1).textContent()).to.include('lead').and.to.include('Check the maps of the pass.');
      // What the delegation answered is in the transcript, not just that it answered.
      expect(await page.getByTestId('tool-result').first().textContent()).to.match(/^answered .*The pass is clear\./s);
      await screenshot(page, `delegation-tree-${viewport === DESKTOP ? 'desktop' : 'phone'}`);
      // A child's session names the task and the agent that delegated it, and opens its parent.
      await nodes.nth(0).getByRole('button', { name: 'scout' }).click();
      await page.getByText('A task lead delegated to scout (succeeded).').waitFor();
      await page.getByRole('listitem').filter({ hasText: 'The pass is clear.' }).first().waitFor();
      await page.getByTestId('delegations').getByRole('button', { name: 'lead' }).first().click();
      await page.getByRole('heading', { name: 'Transcript: expedition' }).waitFor();
      expect(problems.console).to.deep.equal([]);
      await context.close();
    }
  });
});
