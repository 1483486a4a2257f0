/** The files that came with a turn, as the model reads them: kept images as image parts, small text files inline, the rest named. */
import type { AttachmentView } from '../../shared/protocol/results.ts';
import { describeAttachment, type Attachments } from '../channels/module.ts';
import type { UserPart } from '../models/module.ts';

/** Largest text file given to a model as its text. */
export const MAX_TEXT_FILE_BYTES = 32 * 1024;
const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);
const isTextual = (mimeType: string | undefined) => !!mimeType && (mimeType.startsWith('text/') || mimeType === 'application/json');

/** A turn's text with the files that came with it. */
export async function turnWithFiles(text: string, files: readonly AttachmentView[], sessionKey: string, attachments: Pick<Attachments, 'load'>): Promise<UserPart[]> {
  const kept = await attachments.load(sessionKey, files.filter((file) => file.kept).map((file) => file.id));
  const lines = [text];
  const images: UserPart[] = [];
  for (const file of files) {
    const stored = kept.get(file.id);
    if (stored && file.mimeType && IMAGE_TYPES.has(file.mimeType)) {
      images.push({ type: 'image', name: file.name, mimeType: file.mimeType, data: stored.data });
      continue;
    }
    lines.push(describeAttachment(file));
    if (stored && isTextual(file.mimeType) && stored.data.length <= MAX_TEXT_FILE_BYTES) {
      const content = new TextDecoder('utf-8', { fatal: false }).decode(stored.data);
      lines.push(`Content of ${file.name}:\n${content}`);
    }
  }
  const said = lines.filter((line) => line.trim()).join('\n');
  return [...(said ? [{ type: 'text' as const, text: said }] : []), ...images];
}
