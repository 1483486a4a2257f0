import { expect } from 'chai';
import OpenAI, { toFile } from 'openai';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, Home } from '../support/cli.ts';

/** A phrase pocketsphinx hears exactly, with this grammar: what espeak-ng says of it comes back word for word. */
const GRAMMAR = `#JSGF V1.0;
grammar lights;
public <command> = (turn on | turn off) the (lights | radio | heating);
`;

/** A stand-in of an OpenAI-compatible audio server (whisper.cpp's server, speaches): what it was sent, what it answers. */
class AudioServer {
  server!: Server;
  url = '';
  requests: { path: string; authorization?: string; type?: string; body: Buffer }[] = [];
  answer: (path: string) => { status: number; body: Buffer | string; headers?: Record<string, string>; delayMs?: number } = () => ({ status: 500, body: '' });

  async start(): Promise<this> {
    this.server = createServer((req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        this.requests.push({ path: req.url!, authorization: req.headers.authorization, type: req.headers['content-type'], body: Buffer.concat(chunks) });
        const { status, body, headers, delayMs } = this.answer(req.url!);
        setTimeout(() => res.writeHead(status, headers ?? { 'content-type': 'application/json' }).end(body), delayMs ?? 0);
      });
    });
    const port = await freePort();
    await new Promise<void>((resolve) => this.server.listen(port, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${port}/v1`;
    return this;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

describe('voice: the audio endpoints on real local engines (espeak-ng, pocketsphinx, ffmpeg) and on an OpenAI-compatible server (e2e)', function () {
  this.timeout(120_000);
  let home: Home;
  let base: string;
  let openai: OpenAI;
  let folder: string;
  let upstream: AudioServer;
  const spoken = (format: 'wav' | 'mp3' | 'opus') => openai.audio.speech.create({ model: 'tts', voice: 'alloy', input: 'turn on the lights', response_format: format }).then(async (answer) => Buffer.from(await answer.arrayBuffer()));
  const post = (path: string, init: RequestInit) => fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${home.token()}`, ...(init.headers ?? {}) } });
  const form = (parts: Record<string, Blob | string>) => {
    const body = new FormData();
    for (const [name, value] of Object.entries(parts)) {
      if (value instanceof Blob) body.set(name, value, 'note.bin');
      else body.set(name, value);
    }
    return body;
  };
  const local = async () => {
    await home.set('voice', {
      transcribe: { kind: 'command', command: ['pocketsphinx_continuous', '-infile', '{input}', '-jsgf', join(folder, 'lights.jsgf'), '-logfn', '/dev/null'], paths: [folder] },
      speak: { kind: 'auto', voice: 'en-us' },
      maxSeconds: 20,
    });
  };

  before(async () => {
    // A folder anyone may read: the engines run as an unprivileged user in the sandbox, which sees it read-only.
    folder = mkdtempSync(join(tmpdir(), 'voice-grammar-'));
    chmodSync(folder, 0o755);
    writeFileSync(join(folder, 'lights.jsgf'), GRAMMAR, { mode: 0o644 });
    upstream = await new AudioServer().start();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    home = new Home({ GATEWAY_PORT: String(port) });
    await home.set('gateway.http.endpoints', { audio: { enabled: true } });
    await local();
    expect((await home.run(['start'])).code).to.equal(0);
    openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: home.token(), maxRetries: 0 });
  });
  after(async () => {
    home?.cleanup();
    await upstream?.stop();
    rmSync(folder, { recursive: true, force: true });
  });

  it('speaks a text with espeak-ng as WAV, OGG/Opus and MP3 through the official openai client', async () => {
    const wav = await spoken('wav');
    expect(wav.subarray(0, 4).toString()).to.equal('RIFF');
    expect(wav.subarray(8, 12).toString()).to.equal('WAVE');
    expect(wav.length).to.be.greaterThan(20_000);
    const opus = await spoken('opus');
    expect(opus.subarray(0, 4).toString()).to.equal('OggS');
    expect(opus.includes(Buffer.from('OpusHead'))).to.equal(true);
    const mp3 = await spoken('mp3');
    expect(mp3.subarray(0, 3).toString() === 'ID3' || (mp3[0] === 0xff && (mp3[1]! & 0xe0) === 0xe0)).to.equal(true);
  });

  it('transcribes what it spoke, word for word, with pocketsphinx, from any format ffmpeg reads', async () => {
    for (const format of ['mp3', 'opus', 'wav'] as const) {
      const audio = await spoken(format);
      const result = await openai.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(audio, `note.${format === 'opus' ? 'ogg' : format}`) });
      expect(result.text, format).to.equal('turn on the lights');
    }
    const text = await openai.audio.transcriptions.create({ model: 'any', file: await toFile(await spoken('wav'), 'note.wav'), response_format: 'text' });
    expect(String(text).trim()).to.equal('turn on the lights');
    const usage = await home.json(['usage']);
    const voice = usage.byModel.filter((group: any) => group.provider === 'voice' || String(group.key ?? group.model ?? '').includes('pocketsphinx') || String(group.key ?? group.model ?? '').includes('espeak'));
    expect(voice.length, JSON.stringify(usage.byModel)).to.be.greaterThan(0);
  });

  it('answers bad audio, audio too long, a missing file and a wrong body with 400/415 saying why', async () => {
    const noise = await post('/v1/audio/transcriptions', { method: 'POST', body: form({ file: new Blob([Buffer.from('this is not audio at all, only text'.repeat(20))]), model: 'm' }) });
    expect(noise.status).to.equal(400);
    const noiseBody = await noise.json() as any;
    expect(noiseBody.error.message).to.match(/^The audio could not be read: /);
    expect(noiseBody.error.code).to.equal('bad_audio');
    expect(noiseBody.error.message).not.to.include(tmpdir());

    const long = execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=25', '-f', 'mp3', '-']);
    const tooLong = await post('/v1/audio/transcriptions', { method: 'POST', body: form({ file: new Blob([long]), model: 'm' }) });
    expect(tooLong.status).to.equal(400);
    expect(await tooLong.json()).to.have.nested.property('error.message', 'The audio is longer than 20 s (voice.maxSeconds).');

    const missing = await post('/v1/audio/transcriptions', { method: 'POST', body: form({ model: 'm' }) });
    expect(missing.status).to.equal(400);
    expect(await missing.json()).to.have.nested.property('error.param', 'file');

    const json = await post('/v1/audio/transcriptions', { method: 'POST', body: JSON.stringify({ model: 'm' }), headers: { 'content-type': 'application/json' } });
    expect(json.status).to.equal(415);

    const badFormat = await post('/v1/audio/speech', { method: 'POST', body: JSON.stringify({ model: 'm', input: 'hello', response_format: 'midi' }), headers: { 'content-type': 'application/json' } });
    expect(badFormat.status).to.equal(400);
    expect(await badFormat.json()).to.have.nested.property('error.param', 'response_format');
    const empty = await post('/v1/audio/speech', { method: 'POST', body: JSON.stringify({ model: 'm', input: '  ' }), headers: { 'content-type': 'application/json' } });
    expect(empty.status).to.equal(400);
  });

  it('uses an OpenAI-compatible server with its key from the secret store; a server down or rate-limiting is reported plainly', async () => {
    const wav = await spoken('wav');
    expect((await home.run(['secrets', 'set', 'voice.transcribe.apiKey'], { input: 'sk-voice-secret' })).code).to.equal(0);
    await home.set('voice', { transcribe: { kind: 'openai-compatible', baseUrl: upstream.url, model: 'whisper-large' }, speak: { kind: 'openai-compatible', baseUrl: upstream.url, model: 'tts-1' } });
    upstream.requests = [];
    upstream.answer = (path) => path.endsWith('/audio/transcriptions') ? { status: 200, body: JSON.stringify({ text: 'heard by the server' }) } : { status: 200, body: wav, headers: { 'content-type': 'audio/wav' } };
    const heard = await openai.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(await spoken('mp3'), 'note.mp3') });
    expect(heard.text).to.equal('heard by the server');
    const sent = upstream.requests.find((request) => request.path === '/v1/audio/transcriptions')!;
    expect(sent.authorization).to.equal('Bearer sk-voice-secret');
    expect(sent.type).to.match(/^multipart\/form-data; boundary=/);
    expect(sent.body.includes(Buffer.from('whisper-large'))).to.equal(true);
    expect(sent.body.includes(Buffer.from('RIFF'))).to.equal(true);

    const opus = await openai.audio.speech.create({ model: 'x', voice: 'nova', input: 'hello there', response_format: 'opus' });
    expect(Buffer.from(await opus.arrayBuffer()).subarray(0, 4).toString()).to.equal('OggS');
    const speech = upstream.requests.filter((request) => request.path === '/v1/audio/speech').at(-1)!;
    expect(JSON.parse(speech.body.toString())).to.deep.equal({ model: 'tts-1', input: 'hello there', voice: 'nova', response_format: 'wav' });
    expect(speech.authorization).to.equal(undefined);

    upstream.answer = () => ({ status: 429, body: JSON.stringify({ error: { message: 'slow down' } }), headers: { 'content-type': 'application/json', 'retry-after': '7' } });
    const limited = await post('/v1/audio/transcriptions', { method: 'POST', body: form({ file: new Blob([new Uint8Array(wav)]), model: 'm' }) });
    expect(limited.status).to.equal(429);
    expect(limited.headers.get('retry-after')).to.equal('7');
    expect(((await limited.json()) as any).error.message).to.include('slow down');

    const closed = await freePort();
    await home.set('voice.transcribe.baseUrl', `http://127.0.0.1:${closed}/v1`);
    const down = await post('/v1/audio/transcriptions', { method: 'POST', body: form({ file: new Blob([new Uint8Array(wav)]), model: 'm' }) });
    expect(down.status).to.equal(502);
    const downBody = await down.json() as any;
    expect(downBody.error.message).to.equal(`The transcription engine at 127.0.0.1:${closed} could not be reached: ECONNREFUSED.`);
    expect(JSON.stringify(downBody)).not.to.include('sk-voice-secret');
    const log = readFileSync(home.file('gateway.log'), 'utf8');
    expect(log).not.to.include('sk-voice-secret');
    await local();
  });

  it('bounds calls at once by voice.concurrency: one past it over HTTP is answered 429 with Retry-After', async () => {
    const wav = await spoken('wav');
    await home.set('voice', { transcribe: { kind: 'openai-compatible', baseUrl: upstream.url, model: 'w' }, concurrency: 1 });
    upstream.answer = () => ({ status: 200, body: JSON.stringify({ text: 'slow' }), delayMs: 1500 });
    const call = () => post('/v1/audio/transcriptions', { method: 'POST', body: form({ file: new Blob([new Uint8Array(wav)]), model: 'm' }) });
    const first = call();
    await new Promise((resolve) => setTimeout(resolve, 400));
    const second = await call();
    expect(second.status).to.equal(429);
    expect(second.headers.get('retry-after')).to.equal('1');
    expect((await first).status).to.equal(200);
    expect((await call()).status).to.equal(200);
    await local();
  });

  it('gateway doctor names the engines, and says what is missing', async () => {
    const result = await home.run(['doctor', '--json']);
    const check = result.json.checks.find((entry: any) => entry.name === 'voice');
    expect(check, result.stdout).to.include({ status: 'ok' });
    expect(check.detail).to.equal('ffmpeg; transcription: pocketsphinx_continuous; speech: espeak-ng');
    await home.set('voice.speak', { kind: 'command', command: ['piper', '--output_file', '{output}'] });
    const missing = (await home.run(['doctor', '--json'])).json.checks.find((entry: any) => entry.name === 'voice');
    expect(missing).to.include({ status: 'warn' });
    expect(missing.detail).to.include('speech: off (piper (voice.speak.command) is not installed)');
    await local();
  });

  it('is off until its endpoint is on, and needs the inference scope', async () => {
    const token = await home.json(['tokens', 'create', '--name', 'reader', '--scopes', 'jobs:read']);
    const refused = await fetch(`${base}/v1/audio/speech`, { method: 'POST', headers: { authorization: `Bearer ${token.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hi' }) });
    expect(refused.status).to.equal(403);
    await home.set('gateway.http.endpoints.audio.enabled', false);
    const off = await post('/v1/audio/speech', { method: 'POST', body: JSON.stringify({ model: 'm', input: 'hi' }), headers: { 'content-type': 'application/json' } });
    expect(off.status).to.equal(404);
    expect(((await off.json()) as any).error.message).to.include('gateway config set gateway.http.endpoints.audio.enabled true');
    await home.set('gateway.http.endpoints.audio.enabled', true);
  });
});
