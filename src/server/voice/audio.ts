/**
 * Audio in and out through the host's ffmpeg, always in the sandbox (no
 * network, only the call's own folder writable: a crafted file that breaks
 * the decoder reaches nothing of the gateway's). In: any audio ffmpeg reads,
 * made a 16 kHz mono 16-bit WAV of at most voice.maxSeconds. Out: what an
 * engine wrote, made the format a caller asked for.
 */
import { DomainError } from '../kernel/errors.ts';
import type { Contained } from './contained.ts';

/** Formats the gateway speaks in, with their media types and ffmpeg's output options. */
export const SPEECH_FORMATS = {
  wav: { type: 'audio/wav', extension: 'wav', options: ['-c:a', 'pcm_s16le', '-f', 'wav'] },
  opus: { type: 'audio/ogg', extension: 'ogg', options: ['-c:a', 'libopus', '-b:a', '32k', '-application', 'voip', '-f', 'ogg'] },
  mp3: { type: 'audio/mpeg', extension: 'mp3', options: ['-c:a', 'libmp3lame', '-q:a', '4', '-f', 'mp3'] },
  flac: { type: 'audio/flac', extension: 'flac', options: ['-c:a', 'flac', '-f', 'flac'] },
  aac: { type: 'audio/aac', extension: 'aac', options: ['-c:a', 'aac', '-b:a', '64k', '-f', 'adts'] },
  pcm: { type: 'audio/pcm', extension: 'pcm', options: ['-c:a', 'pcm_s16le', '-ar', '24000', '-ac', '1', '-f', 's16le'] },
} as const;
export type SpeechFormat = keyof typeof SPEECH_FORMATS;
export const isSpeechFormat = (value: unknown): value is SpeechFormat => typeof value === 'string' && Object.hasOwn(SPEECH_FORMATS, value);

/** Bytes a second of the WAV the engines hear: 16 000 samples of 2 bytes. */
const WAV_RATE = 32_000;
/** ffmpeg's options shared by every run: no prompt, quiet but for errors, only files (a playlist naming an address reads nothing). */
const FFMPEG = ['ffmpeg', '-nostdin', '-hide_banner', '-loglevel', 'error', '-protocol_whitelist', 'file', '-y'];

/** The first line ffmpeg gave of why it failed, without the folder the file was in. */
function why(stderr: string): string {
  const line = stderr.split('\n').map((text) => text.trim()).find((text) => text.length > 0) ?? 'no reason given';
  return line.replaceAll('/workspace/', '').slice(0, 300);
}

/**
 * Makes the engines' WAV of an audio file in the call's folder: at most
 * maxSeconds (a longer one is refused, decoded no further than a second past
 * it), its length in seconds.
 */
export async function decodeForEngine(contained: Contained, input: string, maxSeconds: number, timeoutMs: number): Promise<{ file: string; seconds: number }> {
  const file = 'heard.wav';
  const result = await contained.run([
    ...FFMPEG, '-i', `/workspace/${input}`, '-map', '0:a:0', '-vn', '-t', String(maxSeconds + 1), '-ac', '1', '-ar', '16000', '-c:a', 'pcm_s16le', '-f', 'wav', `/workspace/${file}`,
  ], { timeoutMs });
  if (result.timedOut) throw new DomainError('invalid', `The audio took longer than ${Math.round(timeoutMs / 1000)} s to decode.`, { code: 'audio_timeout' });
  if (result.exitCode !== 0) {
    const reason = why(result.stderr);
    throw new DomainError('invalid', `The audio could not be read: ${/matches no streams|does not contain any stream/.test(reason) ? 'it holds no sound' : reason}.`, { code: 'bad_audio' });
  }
  const bytes = await contained.size(file);
  const seconds = Math.max(0, bytes - 44) / WAV_RATE;
  if (seconds > maxSeconds) {
    throw new DomainError('invalid', `The audio is longer than ${maxSeconds} s (voice.maxSeconds).`, { code: 'audio_too_long', details: { maxSeconds } });
  }
  if (seconds < 0.05) throw new DomainError('invalid', 'The audio holds no sound.', { code: 'bad_audio' });
  return { file, seconds: Math.round(seconds * 100) / 100 };
}

/** Makes what an engine wrote (any format ffmpeg reads) the format asked for; returns its bytes. */
export async function encodeSpeech(contained: Contained, input: string, format: SpeechFormat, timeoutMs: number): Promise<Buffer> {
  const { extension, options } = SPEECH_FORMATS[format];
  const output = `spoken.${extension}`;
  const result = await contained.run([...FFMPEG, '-i', `/workspace/${input}`, '-map', '0:a:0', '-vn', ...options, `/workspace/${output}`], { timeoutMs });
  if (result.exitCode !== 0) {
    throw new DomainError('upstream', `The speech engine's audio could not be converted to ${format}: ${why(result.stderr)}.`, { code: 'speech_failed' });
  }
  return contained.read(output);
}

/** Seconds of audio in a WAV, MP3 or OGG file, as ffmpeg reads them (for a voice note's duration). */
export async function durationOf(contained: Contained, input: string, timeoutMs: number): Promise<number | undefined> {
  const result = await contained.run(['ffprobe', '-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', `/workspace/${input}`], { timeoutMs });
  const seconds = Number(result.stdout.trim());
  return result.exitCode === 0 && Number.isFinite(seconds) ? seconds : undefined;
}
