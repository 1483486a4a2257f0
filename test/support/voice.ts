/**
 * Speech for the voice tests, from the host's real engines: espeak-ng speaks
 * a phrase, ffmpeg makes it the format an app records in, and pocketsphinx
 * (with a small grammar, so what it hears is exact) transcribes it back.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A phrase pocketsphinx hears exactly, with this grammar: what espeak-ng says of it comes back word for word. */
export const GRAMMAR = `#JSGF V1.0;
grammar lights;
public <command> = (turn on | turn off) the (lights | radio | heating);
`;

/**
 * How each app records: OGG/Opus (Telegram, WhatsApp, Matrix), AAC (Signal,
 * Delta Chat), M4A (Conversations on XMPP), WebM/Opus (Slack's clips). AAC at
 * these rates blurs the f of "off" past what pocketsphinx tells from "on",
 * and "heating" past its hearing: an AAC note that must be heard says "turn
 * on the lights" or "turn on the radio".
 */
const FORMATS = {
  ogg: ['-c:a', 'libopus', '-b:a', '24k', '-f', 'ogg'],
  aac: ['-c:a', 'aac', '-b:a', '48k', '-f', 'adts'],
  m4a: ['-c:a', 'aac', '-b:a', '48k', '-movflags', 'frag_keyframe+empty_moov', '-f', 'mp4'],
  webm: ['-c:a', 'libopus', '-b:a', '24k', '-f', 'webm'],
} as const;

/** A voice note as the apps record them: speech (espeak-ng) in the app's format (ffmpeg). */
export function voiceNote(phrase: string, format: keyof typeof FORMATS = 'ogg'): Buffer {
  const wav = execFileSync('espeak-ng', ['-v', 'en-us', '--stdout', phrase]);
  return execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-i', '-', ...FORMATS[format], '-'], { input: wav });
}

/** Seconds of a tone: audio with no words in it. */
export const tone = (seconds: number, format: keyof typeof FORMATS = 'ogg') =>
  execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', `sine=frequency=440:duration=${seconds}`, ...FORMATS[format], '-']);

/** The seconds of audio ffprobe reads in a file's bytes. */
export function secondsOf(data: Uint8Array): number {
  // From a file: through a pipe ffprobe cannot tell the length of every format.
  const folder = mkdtempSync(join(tmpdir(), 'voice-probe-'));
  try {
    writeFileSync(join(folder, 'audio'), data);
    return Number(execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', join(folder, 'audio')]).toString().trim());
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

/**
 * A folder with the grammar that anyone may read (the engines run as an
 * unprivileged user in the sandbox, which sees it read-only), and the
 * voice settings that use it: pocketsphinx to hear, espeak-ng to speak.
 */
export function voiceEngines(): { folder: string; settings: Record<string, unknown>; remove(): void } {
  const folder = mkdtempSync(join(tmpdir(), 'voice-grammar-'));
  chmodSync(folder, 0o755);
  writeFileSync(join(folder, 'lights.jsgf'), GRAMMAR, { mode: 0o644 });
  return {
    folder,
    settings: {
      transcribe: { kind: 'command', command: ['pocketsphinx_continuous', '-infile', '{input}', '-jsgf', join(folder, 'lights.jsgf'), '-logfn', '/dev/null'], paths: [folder] },
      speak: { kind: 'auto', voice: 'en-us' },
      maxSeconds: 6,
    },
    remove: () => rmSync(folder, { recursive: true, force: true }),
  };
}

/** The text of the last message an agent was given (a string, or the parts of one with files). */
export const flat = (value: unknown) => (typeof value === 'string' ? value : (value as { text?: string }[]).map((part) => part.text ?? '').join('\n'));
