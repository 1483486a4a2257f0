/**
 * A voice note as Matrix clients record and show them: an m.audio message
 * whose file is OGG/Opus in the media store, marked as a voice message
 * (MSC3245's org.matrix.msc3245.voice) with its length in
 * org.matrix.msc1767.audio (Element draws it as a voice message, with a
 * play button and its duration, not as a file).
 */
import type { OutboundVoice } from '../../kernel/channel.ts';
import { oggOpusSeconds } from '../audio-length.ts';
import { inThread } from './outbound.ts';

export function voiceMessage(voice: OutboundVoice, url: string | Record<string, unknown>, thread: string | undefined): Record<string, unknown> {
  const seconds = voice.mimeType === 'audio/ogg' ? oggOpusSeconds(voice.data) : undefined;
  const duration = seconds === undefined ? undefined : Math.round(seconds * 1000);
  return {
    msgtype: 'm.audio', body: 'Voice message', filename: voice.name, ...(typeof url === 'string' ? { url } : { file: url }),
    info: { mimetype: voice.mimeType, size: voice.data.length, ...(duration !== undefined ? { duration } : {}) },
    'org.matrix.msc1767.audio': { ...(duration !== undefined ? { duration } : {}), waveform: [] },
    'org.matrix.msc3245.voice': {},
    'm.mentions': {}, ...inThread(thread),
  };
}
