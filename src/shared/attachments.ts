/** How files sent with channel messages read, for the agent and in `sessions show`. */
import type { AttachmentView } from './protocol/results.ts';

/** A size as people read it: 512 bytes, 34 KB, 2.5 MB. */
export const sizeOf = (bytes: number): string =>
  bytes < 1024 ? `${bytes} bytes` : bytes < 1024 * 1024 ? `${Math.round(bytes / 1024)} KB` : `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/** An attachment in one line: `[image photo.jpg (image/jpeg, 34 KB)]`, with why it was not kept when it was not. */
export function describeAttachment(view: AttachmentView): string {
  const facts = [view.mimeType, view.size === undefined ? undefined : sizeOf(view.size)].filter(Boolean).join(', ');
  return `[${view.mimeType?.startsWith('image/') ? 'image' : 'file'} ${view.name}${facts ? ` (${facts})` : ''}${view.note ? `: ${view.note}` : ''}]`;
}
