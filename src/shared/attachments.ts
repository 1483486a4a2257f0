/** How files sent with channel messages read, for the agent and in `sessions show`. */
import type { AttachmentView } from './protocol/results.ts';

/** A size as people read it: 512 bytes, 34 KB, 2.5 MB. */
export const sizeOf = (bytes: number): string =>
  bytes < 1024 ? `${bytes} bytes` : bytes < 1024 * 1024 ? `${Math.round(bytes / 1024)} KB` : `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/** Whether a file is sound a person may have spoken: a voice note, or an audio file. */
export const isAudio = (view: Pick<AttachmentView, 'voice' | 'mimeType'>): boolean => view.voice === true || (view.mimeType?.startsWith('audio/') ?? false);

/** Seconds as people read them: 4 s, 1 min 12 s. */
const durationOf = (seconds: number): string => {
  const whole = Math.max(1, Math.round(seconds));
  return whole < 60 ? `${whole} s` : `${Math.floor(whole / 60)} min${whole % 60 ? ` ${whole % 60} s` : ''}`;
};

/**
 * An attachment in one line: `[image photo.jpg (image/jpeg, 34 KB)]`, with
 * why it was not kept when it was not. A voice note heard reads as the
 * person's words, marked as spoken: `[spoken in a voice note, 4 s] turn on the lights`.
 */
export function describeAttachment(view: AttachmentView): string {
  const kind = view.voice ? 'voice note' : isAudio(view) ? 'audio file' : undefined;
  if (view.transcript !== undefined) {
    const where = view.voice ? 'a voice note' : `an audio file ${view.name}`;
    return `[spoken in ${where}${view.seconds === undefined ? '' : `, ${durationOf(view.seconds)}`}] ${view.transcript || '(no words heard)'}`;
  }
  const facts = [view.mimeType, view.size === undefined ? undefined : sizeOf(view.size)].filter(Boolean).join(', ');
  return `[${view.mimeType?.startsWith('image/') ? 'image' : kind ?? 'file'} ${view.name}${facts ? ` (${facts})` : ''}${view.note ? `: ${view.note}` : ''}]`;
}
