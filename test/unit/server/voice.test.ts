import { expect } from 'chai';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { effectiveConfig } from '../../../src/shared/config/keys.ts';
import type { VoiceSettings } from '../../../src/shared/config/types.ts';
import { DomainError } from '../../../src/server/kernel/errors.ts';
import type { Contained } from '../../../src/server/voice/contained.ts';
import { fill, speak, speaker, transcribe, transcriber, type Engine } from '../../../src/server/voice/engines.ts';
import { isSpeechFormat, SPEECH_FORMATS } from '../../../src/server/voice/audio.ts';
import { Slots } from '../../../src/server/voice/slots.ts';
import type { ExecResult } from '../../../src/server/sandbox/sandbox.ts';

const voice = (patch: { transcribe?: Partial<VoiceSettings['transcribe']>; speak?: Partial<VoiceSettings['speak']> } = {}): VoiceSettings => {
  const base = effectiveConfig({}).voice;
  return { ...base, transcribe: { ...base.transcribe, ...patch.transcribe }, speak: { ...base.speak, ...patch.speak } };
};

/** A call's folder held in memory, its commands answered by a script: nothing is run. */
class FakeContained {
  files = new Map<string, Buffer>();
  ran: { argv: readonly string[]; input?: string | Buffer; readOnly?: readonly string[] }[] = [];
  answer: (argv: readonly string[]) => Partial<ExecResult> & { writes?: Record<string, string> } = () => ({ exitCode: 0, stdout: '' });

  async run(argv: readonly string[], options: { input?: string | Buffer; readOnly?: readonly string[] }): Promise<ExecResult> {
    this.ran.push({ argv, input: options.input, readOnly: options.readOnly });
    const { writes, ...result } = this.answer(argv);
    for (const [name, text] of Object.entries(writes ?? {})) this.files.set(name, Buffer.from(text));
    return { exitCode: 0, signal: null, stdout: '', stderr: '', truncated: false, timedOut: false, durationMs: 1, limitsPer: 'process', ...result };
  }
  async write(name: string, bytes: Buffer) {
    this.files.set(name, bytes);
  }
  async read(name: string) {
    const found = this.files.get(name);
    if (!found) throw new DomainError('upstream', 'The engine wrote no audio.');
    return found;
  }
  async size(name: string) {
    return this.files.get(name)?.length ?? 0;
  }
}
const fake = () => new FakeContained();
const as = (contained: FakeContained) => contained as unknown as Contained;
const noKey = async () => undefined;

describe('voice engines and their bounds (in process)', () => {
  let bin: string;
  let path: string | undefined;
  before(() => {
    // A PATH of stand-in programs (never run here): what `auto` finds is what is installed.
    bin = mkdtempSync(join(tmpdir(), 'voice-bin-'));
    path = process.env.PATH;
  });
  after(() => {
    process.env.PATH = path;
    rmSync(bin, { recursive: true, force: true });
  });
  const installed = (...programs: string[]) => {
    rmSync(bin, { recursive: true, force: true });
    bin = mkdtempSync(join(tmpdir(), 'voice-bin-'));
    for (const program of programs) {
      writeFileSync(join(bin, program), '#!/bin/sh\n');
      chmodSync(join(bin, program), 0o755);
    }
    process.env.PATH = bin;
  };

  it('auto takes the local engines found on the host, and is off naming them when none is', () => {
    installed('pocketsphinx_continuous', 'espeak-ng');
    expect(transcriber(voice())).to.deep.include({ kind: 'command', name: 'pocketsphinx_continuous' });
    expect(speaker(voice())).to.deep.include({ kind: 'command', name: 'espeak-ng' });
    installed();
    expect(transcriber(voice())).to.deep.equal({ kind: 'off', why: 'no local engine is installed (pocketsphinx_continuous) and voice.transcribe.kind is auto' });
    expect(speaker(voice())).to.deep.equal({ kind: 'off', why: 'no local engine is installed (espeak-ng) and voice.speak.kind is auto' });
  });

  it('a command engine needs its program installed; a server needs its address and model; off is off', () => {
    installed('whisper-cli');
    expect(transcriber(voice({ transcribe: { kind: 'command', command: ['whisper-cli', '-f', '{input}'] } }))).to.deep.include({ kind: 'command', name: 'whisper-cli' });
    expect(transcriber(voice({ transcribe: { kind: 'command', command: ['piper'] } }))).to.deep.equal({ kind: 'off', why: 'piper (voice.transcribe.command) is not installed' });
    expect(transcriber(voice({ transcribe: { kind: 'command', command: [] } }))).to.deep.equal({ kind: 'off', why: 'voice.transcribe.command is empty' });
    expect(speaker(voice({ speak: { kind: 'openai-compatible', model: 'tts-1' } }))).to.deep.equal({ kind: 'off', why: 'voice.speak.baseUrl is not set' });
    expect(speaker(voice({ speak: { kind: 'openai-compatible', baseUrl: 'https://api.example/v1/' } }))).to.deep.equal({ kind: 'off', why: 'voice.speak.model is not set' });
    expect(speaker(voice({ speak: { kind: 'openai-compatible', baseUrl: 'https://api.example/v1/', model: 'tts-1' } }))).to.deep.equal({ kind: 'openai-compatible', baseUrl: 'https://api.example/v1', model: 'tts-1', name: 'api.example tts-1' });
    expect(speaker(voice({ speak: { kind: 'off' } }))).to.deep.equal({ kind: 'off', why: 'voice.speak.kind is off' });
  });

  it('fills {input}, {output} and {text} wherever they stand in an argument, and nothing else', () => {
    expect(fill(['engine', '-f', '{input}', '--out={output}', '{text}', '{other}', '{{input}}'], { input: '/workspace/a.wav', output: '/workspace/o', text: 'hi; rm -rf /' }))
      .to.deep.equal(['engine', '-f', '/workspace/a.wav', '--out=/workspace/o', 'hi; rm -rf /', '{other}', '{/workspace/a.wav}']);
  });

  it('a command engine: its transcript read from its output (lines joined), its models bound read-only, its failure named', async () => {
    const engine: Engine = { kind: 'command', command: ['pocketsphinx_continuous', '-infile', '{input}'], paths: ['/models'], name: 'pocketsphinx_continuous' };
    const contained = fake();
    contained.answer = () => ({ stdout: 'turn on\n\n  the lights  \n' });
    expect(await transcribe(engine, { contained: as(contained), file: 'heard.wav', timeoutMs: 1000, apiKey: noKey })).to.equal('turn on the lights');
    expect(contained.ran[0]).to.deep.include({ argv: ['pocketsphinx_continuous', '-infile', '/workspace/heard.wav'], readOnly: ['/models'] });

    contained.answer = () => ({ exitCode: 3, stderr: 'loading\nERROR: cannot open /workspace/heard.wav: no such file\n' });
    const failed = await transcribe(engine, { contained: as(contained), file: 'heard.wav', timeoutMs: 1000, apiKey: noKey }).catch((error: DomainError) => error);
    expect(failed).to.be.instanceOf(DomainError).and.to.include({ kind: 'upstream', message: 'The transcription engine (pocketsphinx_continuous) failed (exit 3): loading ERROR: cannot open heard.wav: no such file.' });
    contained.answer = () => ({ exitCode: null, signal: 'SIGKILL', timedOut: true });
    const slow = await transcribe(engine, { contained: as(contained), file: 'heard.wav', timeoutMs: 4000, apiKey: noKey }).catch((error: DomainError) => error);
    expect(slow).to.include({ kind: 'upstream', message: 'The transcription engine (pocketsphinx_continuous) took longer than 4 s.', reason: 'voice_timeout' });
  });

  it('a command speaker: the text on standard input unless an argument takes {text}; no audio written is an error', async () => {
    const espeak: Engine = { kind: 'command', command: ['espeak-ng', '-w', '{output}', '--stdin'], paths: [], name: 'espeak-ng' };
    const contained = fake();
    contained.answer = () => ({ writes: { 'engine-output': 'RIFF....' } });
    expect(await speak(espeak, { contained: as(contained), text: 'hello', voice: 'en-us', timeoutMs: 1000, apiKey: noKey })).to.equal('engine-output');
    expect(contained.ran[0]).to.deep.include({ argv: ['espeak-ng', '-v', 'en-us', '-w', '/workspace/engine-output', '--stdin'], input: 'hello' });

    const piper: Engine = { kind: 'command', command: ['say', '{text}', '-o', '{output}'], paths: [], name: 'say' };
    const quiet = fake();
    quiet.answer = () => ({ exitCode: 0 });
    const none = await speak(piper, { contained: as(quiet), text: 'hello', timeoutMs: 1000, apiKey: noKey }).catch((error: DomainError) => error);
    expect(quiet.ran[0]).to.deep.include({ argv: ['say', 'hello', '-o', '/workspace/engine-output'], input: undefined });
    expect(none).to.include({ kind: 'upstream', message: 'The speech engine (say) wrote no audio.' });
  });

  describe('an OpenAI-compatible server', () => {
    let server: Server;
    let base: string;
    let seen: { url: string; authorization?: string; type?: string; body: string }[] = [];
    let reply: () => { status: number; body: string; headers?: Record<string, string> } = () => ({ status: 200, body: '{"text":" hello "}' });
    before(async () => {
      server = createServer((req, res) => {
        let body = '';
        req.setEncoding('latin1').on('data', (chunk: string) => {
          body += chunk;
        }).on('end', () => {
          seen.push({ url: req.url!, authorization: req.headers.authorization, type: req.headers['content-type'], body });
          const { status, body: out, headers } = reply();
          res.writeHead(status, headers ?? { 'content-type': 'application/json' }).end(out);
        });
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    });
    after(() => new Promise((resolve) => server.close(resolve)));
    beforeEach(() => {
      seen = [];
    });
    const engine = () => ({ kind: 'openai-compatible' as const, baseUrl: base, model: 'whisper-1', name: 'local whisper-1' });

    it('sends the WAV as a form with the model, the language and the key; reads the text back', async () => {
      const contained = fake();
      contained.files.set('heard.wav', Buffer.from('RIFF-wav-bytes'));
      reply = () => ({ status: 200, body: '{"text":"  hello there \\n"}' });
      expect(await transcribe(engine(), { contained: as(contained), file: 'heard.wav', timeoutMs: 5000, language: 'en', apiKey: async () => 'sk-1' })).to.equal('hello there');
      expect(seen[0]!.url).to.equal('/v1/audio/transcriptions');
      expect(seen[0]!.authorization).to.equal('Bearer sk-1');
      expect(seen[0]!.type).to.match(/^multipart\/form-data; boundary=/);
      for (const part of ['name="model"\r\n\r\nwhisper-1', 'name="language"\r\n\r\nen', 'name="response_format"\r\n\r\njson', 'filename="audio.wav"', 'RIFF-wav-bytes']) expect(seen[0]!.body).to.include(part);
    });

    it('its refusals, its rate limits (with their wait) and an answer without text are errors naming the engine', async () => {
      const contained = fake();
      contained.files.set('heard.wav', Buffer.from('RIFF'));
      const call = () => transcribe(engine(), { contained: as(contained), file: 'heard.wav', timeoutMs: 5000, apiKey: noKey }).catch((error: DomainError) => error);
      reply = () => ({ status: 400, body: '{"error":{"message":"Invalid file format."}}' });
      expect(await call()).to.include({ kind: 'upstream', message: 'The transcription engine answered 400: Invalid file format..' });
      reply = () => ({ status: 429, body: '{"error":"slow down"}', headers: { 'retry-after': '12' } });
      const limited = await call() as DomainError;
      expect(limited.kind).to.equal('rate_limited');
      expect(limited.headers['retry-after']).to.equal('12');
      reply = () => ({ status: 200, body: '{"words":[]}' });
      expect(await call()).to.include({ kind: 'upstream', message: 'The transcription engine answered without a text.' });
      expect(seen.every((request) => request.authorization === undefined)).to.equal(true);
    });

    it('speech: the text, the voice and WAV asked for; the audio written to the call\'s folder', async () => {
      const contained = fake();
      reply = () => ({ status: 200, body: 'RIFFaudio', headers: { 'content-type': 'audio/wav' } });
      const written = await speak({ ...engine(), model: 'tts-1' }, { contained: as(contained), text: 'hi', voice: 'nova', timeoutMs: 5000, apiKey: noKey });
      expect(contained.files.get(written)!.toString()).to.equal('RIFFaudio');
      expect(JSON.parse(seen[0]!.body)).to.deep.equal({ model: 'tts-1', input: 'hi', voice: 'nova', response_format: 'wav' });
      reply = () => ({ status: 200, body: '' });
      expect(await speak(engine(), { contained: as(fake()), text: 'hi', timeoutMs: 5000, apiKey: noKey }).catch((error: DomainError) => error)).to.include({ message: 'The speech engine answered with no audio.' });
    });

    it('a server that is not there is named by its host, never by its full address', async () => {
      const contained = fake();
      contained.files.set('heard.wav', Buffer.from('RIFF'));
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const port = (closed.address() as AddressInfo).port;
      await new Promise((resolve) => closed.close(resolve));
      const gone: Engine = { kind: 'openai-compatible', baseUrl: `http://127.0.0.1:${port}/v1?key=x`, model: 'm', name: 'x' };
      const error = await transcribe(gone, { contained: as(contained), file: 'heard.wav', timeoutMs: 5000, apiKey: noKey }).catch((failure: DomainError) => failure) as DomainError;
      expect(error.message).to.equal(`The transcription engine at 127.0.0.1:${port} could not be reached: ECONNREFUSED.`);
      const withCredentials: Engine = { ...gone, baseUrl: 'http://user:hunter2@127.0.0.1:1/v1' };
      const refused = await transcribe(withCredentials, { contained: as(contained), file: 'heard.wav', timeoutMs: 5000, apiKey: noKey }).catch((failure: DomainError) => failure) as DomainError;
      expect(refused.kind).to.equal('invalid_config');
      expect(refused.message).not.to.include('hunter2');
    });
  });

  it('off is refused as unavailable, with why', async () => {
    const error = await transcribe({ kind: 'off', why: 'voice.transcribe.kind is off' }, { contained: as(fake()), file: 'x', timeoutMs: 1, apiKey: noKey }).catch((failure: DomainError) => failure);
    expect(error).to.include({ kind: 'unavailable', message: 'Transcription is off: voice.transcribe.kind is off.' });
  });

  it('speaks in the formats clients ask for, each with its media type', () => {
    expect(Object.fromEntries(Object.entries(SPEECH_FORMATS).map(([format, { type }]) => [format, type]))).to.deep.equal({
      wav: 'audio/wav', opus: 'audio/ogg', mp3: 'audio/mpeg', flac: 'audio/flac', aac: 'audio/aac', pcm: 'audio/pcm',
    });
    expect(isSpeechFormat('opus')).to.equal(true);
    expect(isSpeechFormat('midi')).to.equal(false);
    expect(isSpeechFormat('toString')).to.equal(false);
  });

  describe('calls at once', () => {
    it('runs up to the bound, the next waiting in order for a release', async () => {
      const slots = new Slots();
      const first = await slots.take(2, true);
      const second = await slots.take(2, true);
      const order: string[] = [];
      const third = slots.take(2, true).then((release) => {
        order.push('third');
        return release;
      });
      const fourth = slots.take(2, true).then((release) => {
        order.push('fourth');
        return release;
      });
      await new Promise((resolve) => setImmediate(resolve));
      expect(order).to.deep.equal([]);
      first();
      first(); // twice is once
      const releaseThird = await third;
      await new Promise((resolve) => setImmediate(resolve));
      expect(order).to.deep.equal(['third']);
      second();
      (await fourth)();
      releaseThird();
      // All free again: two more at once without waiting.
      const again = [await slots.take(2, false), await slots.take(2, false)];
      again.forEach((release) => release());
    });

    it('refuses a caller that may not wait with 429 and a Retry-After', async () => {
      const slots = new Slots();
      const held = await slots.take(1, false);
      const refused = await slots.take(1, false).catch((error: DomainError) => error) as DomainError;
      expect(refused.kind).to.equal('rate_limited');
      expect(refused.message).to.equal('1 voice calls are running already (voice.concurrency); try again in 1 s.');
      expect(refused.headers['retry-after']).to.equal('1');
      held();
      (await slots.take(1, false))();
    });
  });
});
