import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DiscordApi, nextId } from '../test/support/discord-api.ts';
import { openaiText, ScriptedUpstream } from '../test/support/scripted-upstream.ts';
import { SlackApi } from '../test/support/slack-api.ts';
import { TelegramApi } from '../test/support/telegram-api.ts';
import { freePort, rssKiB, sleep } from './support.ts';
const BIN = new URL('../bin/run.js', import.meta.url).pathname;
const TG = '7001234567:AAH-leak';
const tgApi = await new TelegramApi().start(); tgApi.addBot(TG, 'leakbot');
const slack = await new SlackApi().start(); const discord = await new DiscordApi().start();
const upstream = await new ScriptedUpstream().start();
upstream.responder = (request) => openaiText(`Answer: ${String(request.body.messages.at(-1).content)}`, undefined, { pieces: 3 });
const home = mkdtempSync(join(tmpdir(), 'leak-'));
const snaps = mkdtempSync(join(tmpdir(), 'leak-snaps-'));
const env = { ...process.env, GATEWAY_HOME: home, GATEWAY_PORT: String(await freePort()), CI: 'true' };
const g = (args: string[], input?: string) => { const r = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', input }); if (r.status) throw new Error(r.stderr); return r.stdout; };
const tg = { id: 6_200_001, first_name: 'L' }; const su = { user: slack.user('U0LEAK1', 'L'), dm: 'D0LEAK1' }; const du = { id: nextId(), username: 'l' }; const ddm = discord.dmOf(du);
g(['config', 'set', 'models.providers.script', JSON.stringify({ kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } })]);
g(['config', 'set', 'agents.helper', JSON.stringify({ model: 'script/m' })]);
g(['config', 'set', 'runtime', JSON.stringify({ senderLimit: { max: 100000, windowMs: 60000 } })]);
g(['config', 'set', 'channels.telegram', JSON.stringify({ enabled: true, agent: 'helper', allowFrom: [String(tg.id)], apiRoot: tgApi.apiRoot })]); g(['secrets', 'set', 'channels.telegram.botToken'], TG);
g(['config', 'set', 'channels.slack', JSON.stringify({ enabled: true, agent: 'helper', allowFrom: [su.user], apiRoot: slack.apiRoot })]); g(['secrets', 'set', 'channels.slack.botToken'], slack.botToken); g(['secrets', 'set', 'channels.slack.appToken'], slack.appToken);
g(['config', 'set', 'channels.discord', JSON.stringify({ enabled: true, agent: 'helper', allowFrom: [du.id], apiRoot: discord.apiRoot })]); g(['secrets', 'set', 'channels.discord.botToken'], discord.token);
const daemon = spawn(process.execPath, ['--max-semi-space-size=8', '--no-memory-reducer', '--v8-pool-size=1', '--heapsnapshot-signal=SIGUSR2', '--expose-gc', BIN, 'run', '--profile', 'default'], { env, cwd: snaps, stdio: 'ignore' });
await sleep(8000);
const minutes = Number(process.argv[2] ?? 8);
const start = Date.now(); let n = 0; const snapAt = [2, minutes - 0.2].map((m) => start + m * 60_000); let next = 0;
while (Date.now() < start + minutes * 60_000) {
  const text = `leak ${++n}`;
  tgApi.message(TG, { chat: { id: tg.id, type: 'private' }, from: tg, text });
  slack.message({ user: su.user, channel: su.dm, text });
  discord.message({ author: du, channel: ddm, content: text });
  if (process.env.SNAP && next < snapAt.length && Date.now() >= snapAt[next]!) { daemon.kill('SIGUSR2'); console.log('snapshot', next, 'rss', (rssKiB(daemon.pid!) / 1024).toFixed(1)); next++; await sleep(4000); }
  if (n % 100 === 0) {
    const m = JSON.parse(g(['status', '--json'])).memory;
    const { readFileSync } = await import('node:fs');
    const roll = readFileSync(`/proc/${daemon.pid}/smaps_rollup`, 'utf8');
    const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(roll)?.[1] ?? 0) / 1024;
    console.log(((Date.now() - start) / 60000).toFixed(1), 'min rss', (m.rss / 1048576).toFixed(1), 'heapUsed', (m.heapUsed / 1048576).toFixed(1), 'heapTotal', (m.heapTotal / 1048576).toFixed(1), 'external', (m.external / 1048576).toFixed(1), 'anon', kb('Anonymous').toFixed(1), 'file', (kb('Rss') - kb('Anonymous')).toFixed(1));
  }
  await sleep(300);
}
console.log('messages', n * 3, 'rss', (rssKiB(daemon.pid!) / 1024).toFixed(1), 'snaps in', snaps, readdirSync(snaps));
daemon.kill('SIGTERM');
await sleep(2000);
await tgApi.stop(); await slack.stop(); await discord.stop(); await upstream.stop();
