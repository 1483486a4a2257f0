/** Serving files below a mount: the content type of a name, and a request path checked segment by segment. */
import { extname } from 'node:path';

const MIME: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.htm': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.ico': 'image/x-icon',
  '.wasm': 'application/wasm',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.xml': 'application/xml',
  '.pdf': 'application/pdf',
};

export const mimeTypeOf = (file: string): string => MIME[extname(file).toLowerCase()] ?? 'application/octet-stream';

/**
 * The segments of a request path below a mount, each decoded once and checked:
 * no dot segments, no slashes or backslashes hidden in an encoding, no NUL.
 * Undefined for anything that is not a plain path (the caller answers 404).
 */
export function safeSegments(rawPath: string, mount: string): string[] | undefined {
  if (!rawPath.startsWith(mount)) return undefined;
  const rest = rawPath.slice(mount.length);
  const segments: string[] = [];
  for (const raw of rest.split('/')) {
    if (raw === '') continue;
    let segment: string;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      return undefined;
    }
    if (segment === '.' || segment === '..' || /[/\\\0]/.test(segment) || segment.includes('%')) return undefined;
    segments.push(segment);
  }
  return segments;
}

