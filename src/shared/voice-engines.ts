/**
 * Which voice engine each direction runs on, as the configuration and the
 * host's programs decide: read by the daemon and by `gateway doctor`.
 */
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { VoiceSettings } from './config/types.ts';

/** An engine as it will run: a command, or a server. */
export type Engine =
  | { kind: 'command'; command: readonly string[]; paths: readonly string[]; name: string }
  | { kind: 'openai-compatible'; baseUrl: string; model: string; name: string }
  | { kind: 'off'; why: string };

/** Where a program is on the PATH, or undefined. */
export function onPath(program: string): string | undefined {
  if (program.includes('/')) return existsSync(program) ? program : undefined;
  for (const folder of (process.env.PATH ?? '').split(delimiter)) {
    if (folder && existsSync(join(folder, program))) return join(folder, program);
  }
  return undefined;
}

/** Local engines `auto` looks for, in order. */
const LOCAL_TRANSCRIBERS: readonly (readonly string[])[] = [
  ['pocketsphinx_continuous', '-infile', '{input}', '-logfn', '/dev/null'],
];
const LOCAL_SPEAKERS: readonly (readonly string[])[] = [
  ['espeak-ng', '-w', '{output}', '--stdin'],
];

function resolve(settings: VoiceSettings['transcribe'] | VoiceSettings['speak'], local: readonly (readonly string[])[], what: 'transcribe' | 'speak'): Engine {
  switch (settings.kind) {
    case 'off':
      return { kind: 'off', why: `voice.${what}.kind is off` };
    case 'openai-compatible':
      if (!settings.baseUrl) return { kind: 'off', why: `voice.${what}.baseUrl is not set` };
      if (!settings.model) return { kind: 'off', why: `voice.${what}.model is not set` };
      return { kind: 'openai-compatible', baseUrl: settings.baseUrl.replace(/\/+$/, ''), model: settings.model, name: `${new URL(settings.baseUrl).host} ${settings.model}` };
    case 'command': {
      const [program] = settings.command;
      if (!program) return { kind: 'off', why: `voice.${what}.command is empty` };
      if (!onPath(program)) return { kind: 'off', why: `${program} (voice.${what}.command) is not installed` };
      return { kind: 'command', command: settings.command, paths: settings.paths, name: program.split('/').pop()! };
    }
    default: {
      const found = local.find(([program]) => onPath(program!));
      if (!found) return { kind: 'off', why: `no local engine is installed (${local.map(([program]) => program).join(', ')}) and voice.${what}.kind is auto` };
      return { kind: 'command', command: found, paths: [], name: found[0]! };
    }
  }
}

export const transcriber = (voice: VoiceSettings): Engine => resolve(voice.transcribe, LOCAL_TRANSCRIBERS, 'transcribe');
export const speaker = (voice: VoiceSettings): Engine => resolve(voice.speak, LOCAL_SPEAKERS, 'speak');
