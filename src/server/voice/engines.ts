/**
 * The voice engines: speech to text and text to speech, each a command run
 * in the sandbox without a shell (the local engines: pocketsphinx,
 * whisper.cpp's whisper-cli, espeak-ng, Piper) or an OpenAI-compatible server
 * (POST /audio/transcriptions, POST /audio/speech: OpenAI, Groq, whisper.cpp's
 * server, speaches). `auto` takes a local engine found on the host, so audio
 * never leaves it unless an operator points it elsewhere.
 */
import type { Engine } from '../../shared/voice-engines.ts';
import { DomainError, rateLimited } from '../kernel/errors.ts';
import type { Contained } from './contained.ts';

export { onPath, speaker, transcriber, type Engine } from '../../shared/voice-engines.ts';

/** An argument list with its placeholders replaced (each whole occurrence, in every argument). */
export const fill = (command: readonly string[], values: Record<string, string>): string[] =>
  command.map((arg) => arg.replace(/\{(input|output|text)\}/g, (whole, name: string) => values[name] ?? whole));

/** The last lines an engine wrote on its standard error, for an error message. */
const tail = (stderr: string) => stderr.trim().split('\n').slice(-2).join(' ').replaceAll('/workspace/', '').slice(0, 300);

/** Why a server could not be reached, by its host alone (never its address's credentials, path or query). */
function unreachable(what: string, baseUrl: string, error: unknown): DomainError {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
  const timedOut = (error as Error).name === 'TimeoutError';
  const said = typeof cause?.message === 'string' && cause.message.length <= 120 && !cause.message.includes('://') ? cause.message : undefined;
  const reason = timedOut ? 'it did not answer in time' : typeof cause?.code === 'string' ? cause.code : said ?? 'the connection failed';
  return new DomainError('upstream', `The ${what} engine at ${new URL(baseUrl).host} could not be reached: ${reason}.`, { code: 'voice_unreachable', retryable: true });
}

/** The address of an endpoint of a server: its path under the base address, the query kept; credentials refused. */
function endpoint(what: string, baseUrl: string, path: string): string {
  const url = new URL(baseUrl);
  if (url.username || url.password) {
    throw new DomainError('invalid_config', `The ${what} engine's address holds a user name or password: remove it, and keep the key in the secret store (voice.${what === 'speech' ? 'speak' : 'transcribe'}.apiKey).`, { code: 'voice_address' });
  }
  url.pathname = `${url.pathname.replace(/\/+$/, '')}${path}`;
  return url.href;
}

/** Most bytes read of a server's answer: a transcript's JSON, or speech's audio. */
const TEXT_LIMIT = 4 * 1024 * 1024;
const AUDIO_LIMIT = 256 * 1024 * 1024;

/** A server's answer, read up to a limit (an engine that sends without end is cut off with an error). */
async function bounded(what: string, response: Response, limit: number): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body ?? []) {
    size += chunk.byteLength;
    if (size > limit) {
      await response.body?.cancel().catch(() => undefined);
      throw new DomainError('upstream', `The ${what} engine answered with more than ${limit / 1024 / 1024} MB.`, { code: 'voice_too_much' });
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** An error answer of a server, as the caller reads it. */
async function refused(what: string, response: Response): Promise<DomainError> {
  let message = '';
  try {
    const text = (await response.text()).slice(0, 2000);
    try {
      const parsed = JSON.parse(text) as { error?: { message?: string } | string; message?: string };
      message = typeof parsed.error === 'string' ? parsed.error : parsed.error?.message ?? parsed.message ?? '';
    } catch {
      message = text;
    }
  } catch {
    // No body.
  }
  message = message.replace(/\s+/g, ' ').trim().slice(0, 300);
  if (response.status === 429) {
    const seconds = Number(response.headers.get('retry-after'));
    return rateLimited(Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 1000, `The ${what} engine is rate-limiting the gateway${message ? `: ${message}` : ''}`);
  }
  return new DomainError('upstream', `The ${what} engine answered ${response.status}${message ? `: ${message}` : ''}.`, { code: 'voice_refused', details: { status: response.status } });
}

export interface TranscribeCall {
  contained: Contained;
  /** The engines' WAV in the call's folder. */
  file: string;
  timeoutMs: number;
  language?: string;
  apiKey: () => Promise<string | undefined>;
}

/** The words of a WAV, as the engine heard them (empty when it heard none). */
export async function transcribe(engine: Engine, call: TranscribeCall): Promise<string> {
  if (engine.kind === 'off') throw new DomainError('unavailable', `Transcription is off: ${engine.why}.`, { code: 'transcription_off' });
  if (engine.kind === 'command') {
    const result = await call.contained.run(fill(engine.command, { input: `/workspace/${call.file}` }), { timeoutMs: call.timeoutMs, readOnly: engine.paths });
    if (result.timedOut) throw new DomainError('upstream', `The transcription engine (${engine.name}) took longer than ${Math.round(call.timeoutMs / 1000)} s.`, { code: 'voice_timeout' });
    if (result.exitCode !== 0) throw new DomainError('upstream', `The transcription engine (${engine.name}) failed (exit ${result.exitCode ?? result.signal}): ${tail(result.stderr) || 'no reason given'}.`, { code: 'voice_failed' });
    return result.stdout.split('\n').map((line) => line.trim()).filter(Boolean).join(' ');
  }
  const form = new FormData();
  form.set('file', new Blob([new Uint8Array(await call.contained.read(call.file))], { type: 'audio/wav' }), 'audio.wav');
  form.set('model', engine.model);
  form.set('response_format', 'json');
  if (call.language) form.set('language', call.language);
  const key = await call.apiKey();
  const url = endpoint('transcription', engine.baseUrl, '/audio/transcriptions');
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST', body: form, headers: key ? { authorization: `Bearer ${key}` } : {}, signal: AbortSignal.timeout(call.timeoutMs),
    });
  } catch (error) {
    throw unreachable('transcription', engine.baseUrl, error);
  }
  if (!response.ok) throw await refused('transcription', response);
  let body: { text?: unknown } | undefined;
  try {
    body = JSON.parse((await bounded('transcription', response, TEXT_LIMIT)).toString('utf8')) as { text?: unknown };
  } catch (error) {
    if (error instanceof DomainError) throw error;
  }
  if (typeof body?.text !== 'string') throw new DomainError('upstream', 'The transcription engine answered without a text.', { code: 'voice_refused' });
  return body.text.trim();
}

export interface SpeakCall {
  contained: Contained;
  text: string;
  voice?: string;
  timeoutMs: number;
  apiKey: () => Promise<string | undefined>;
}

/** Speaks a text; returns the name of the file the engine wrote in the call's folder (any format ffmpeg reads). */
export async function speak(engine: Engine, call: SpeakCall): Promise<string> {
  if (engine.kind === 'off') throw new DomainError('unavailable', `Speech is off: ${engine.why}.`, { code: 'speech_off' });
  if (engine.kind === 'command') {
    const output = 'engine-output';
    const onArguments = engine.command.some((arg) => arg.includes('{text}'));
    let command = fill(engine.command, { output: `/workspace/${output}`, text: call.text });
    // espeak-ng found by auto speaks in the voice configured, if any.
    if (call.voice && engine.name === 'espeak-ng' && !command.includes('-v')) command = [command[0]!, '-v', call.voice, ...command.slice(1)];
    const result = await call.contained.run(command, { timeoutMs: call.timeoutMs, readOnly: engine.paths, ...(onArguments ? {} : { input: call.text }) });
    if (result.timedOut) throw new DomainError('upstream', `The speech engine (${engine.name}) took longer than ${Math.round(call.timeoutMs / 1000)} s.`, { code: 'voice_timeout' });
    if (result.exitCode !== 0) throw new DomainError('upstream', `The speech engine (${engine.name}) failed (exit ${result.exitCode ?? result.signal}): ${tail(result.stderr) || 'no reason given'}.`, { code: 'voice_failed' });
    if ((await call.contained.size(output)) === 0) throw new DomainError('upstream', `The speech engine (${engine.name}) wrote no audio.`, { code: 'no_audio' });
    return output;
  }
  const key = await call.apiKey();
  const url = endpoint('speech', engine.baseUrl, '/audio/speech');
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify({ model: engine.model, input: call.text, voice: call.voice ?? 'alloy', response_format: 'wav' }),
      signal: AbortSignal.timeout(call.timeoutMs),
    });
  } catch (error) {
    throw unreachable('speech', engine.baseUrl, error);
  }
  if (!response.ok) throw await refused('speech', response);
  const bytes = await bounded('speech', response, AUDIO_LIMIT);
  if (bytes.length === 0) throw new DomainError('upstream', 'The speech engine answered with no audio.', { code: 'no_audio' });
  const output = 'engine-output';
  await call.contained.write(output, bytes);
  return output;
}
