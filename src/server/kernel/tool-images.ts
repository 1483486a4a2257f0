/**
 * Images a tool made (a browser's screenshot) for the model that called it.
 * A tool's result is JSON, kept in the session and shown to its callers, so
 * the picture itself does not travel in it: the tool holds the bytes here and
 * puts `image: {ref, mimeType, name}` in its result. When the model of the
 * run takes images (models.providers.<id>.imageModels), the model caller
 * finds the reference and gives the model the picture; other models, later
 * turns and every other reader see the reference and the file's name only.
 * Held a short while and bounded in number and bytes: an image nobody asked
 * for is let go.
 */
import { randomBytes } from 'node:crypto';

export interface ToolImage {
  ref: string;
  mimeType: string;
  /** What the image is called where it is kept (a workspace path). */
  name: string;
}

/** How long, how many and how many bytes of images are held at most. */
export const TOOL_IMAGE_LIMITS = { heldMs: 10 * 60_000, count: 32, bytes: 64 * 1024 * 1024 } as const;

const held = new Map<string, ToolImage & { data: Uint8Array; at: number }>();
let heldBytes = 0;

function letGo(ref: string): void {
  const image = held.get(ref);
  if (!image) return;
  held.delete(ref);
  heldBytes -= image.data.byteLength;
}

/** Holds an image for the model; answers what the tool's result carries. */
export function holdToolImage(data: Uint8Array, mimeType: string, name: string, now = Date.now()): ToolImage {
  for (const [ref, image] of held) if (now - image.at > TOOL_IMAGE_LIMITS.heldMs) letGo(ref);
  while (held.size >= TOOL_IMAGE_LIMITS.count || (held.size > 0 && heldBytes + data.byteLength > TOOL_IMAGE_LIMITS.bytes)) letGo(held.keys().next().value!);
  const image: ToolImage = { ref: `img_${randomBytes(12).toString('base64url')}`, mimeType, name };
  if (data.byteLength <= TOOL_IMAGE_LIMITS.bytes) {
    held.set(image.ref, { ...image, data, at: now });
    heldBytes += data.byteLength;
  }
  return image;
}

/** The image a tool's result refers to, while it is held. */
export function heldToolImage(content: unknown): (ToolImage & { data: Uint8Array }) | undefined {
  const image = (content as { image?: { ref?: unknown } } | null)?.image;
  if (!image || typeof image !== 'object' || typeof image.ref !== 'string') return undefined;
  const found = held.get(image.ref);
  return found && Date.now() - found.at <= TOOL_IMAGE_LIMITS.heldMs ? found : undefined;
}
