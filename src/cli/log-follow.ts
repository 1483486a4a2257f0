import { closeSync, openSync, readSync, statSync } from 'node:fs';

const POLL_MS = 200;

/**
 * Prints lines appended to a file until the process is interrupted. A rotation
 * (new inode or a shorter file) is followed from the start of the new file.
 */
export function followFile(path: string, onLine: (line: string) => void): Promise<never> {
  let inode = -1;
  let offset = 0;
  let partial = '';
  try {
    const stat = statSync(path);
    inode = stat.ino;
    offset = stat.size;
  } catch {
    // not written yet: follow from its first line
  }
  const buffer = Buffer.alloc(64 * 1024);
  const poll = () => {
    let stat;
    try {
      stat = statSync(path);
    } catch {
      return;
    }
    if (stat.ino !== inode || stat.size < offset) {
      inode = stat.ino;
      offset = 0;
      partial = '';
    }
    if (stat.size === offset) return;
    const fd = openSync(path, 'r');
    try {
      let read: number;
      while ((read = readSync(fd, buffer, 0, buffer.length, offset)) > 0) {
        offset += read;
        const lines = (partial + buffer.toString('utf8', 0, read)).split('\n');
        partial = lines.pop() ?? '';
        lines.forEach(onLine);
      }
    } finally {
      closeSync(fd);
    }
  };
  return new Promise<never>(() => {
    setInterval(poll, POLL_MS);
  });
}
