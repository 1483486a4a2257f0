import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

/** The last lines of a file, reading at most maxBytes from its end. */
export function lastLines(path: string, count: number, maxBytes = 4 * 1024 * 1024): string[] {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return [];
  }
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, maxBytes);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    const lines = buffer.toString('utf8').split('\n');
    if (lines.at(-1) === '') lines.pop();
    if (length < size) lines.shift();
    return count <= 0 ? [] : lines.slice(-count);
  } finally {
    closeSync(fd);
  }
}
