import { expect } from 'chai';
import { EventEmitter } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BrowserSession } from '../../../src/server/toolbox/browser-session.ts';
import { Workspace } from '../../../src/server/toolbox/workspace.ts';

/** A page and a download as Playwright hands them over, without a browser: what the session does with a download's file. */
function fakeDownload(path: string, name: string) {
  return {
    failure: async () => null, path: async () => path, suggestedFilename: () => name, url: () => `http://example.org/${name}`,
    cancel: async () => undefined, delete: async () => undefined,
  };
}

describe('a browser\'s downloads reach the workspace only as the regular files the sandbox left', () => {
  let dir: string;
  let downloads: string;
  let page: EventEmitter & { url(): string; close(): Promise<void> };
  let session: BrowserSession;
  const notes = () => (session as unknown as { notes: string[] }).notes;
  const kept = () => (session as unknown as { downloaded: { path: string }[] }).downloaded;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gateway-downloads-test-'));
    downloads = join(dir, 'downloads');
    mkdirSync(downloads);
    page = Object.assign(new EventEmitter(), { url: () => 'http://example.org/', close: async () => undefined });
    const context = Object.assign(new EventEmitter(), { pages: () => [page], close: async () => undefined });
    session = new BrowserSession({
      context: context as never, proxy: { mark: () => 0, refusedSince: () => [], failedSince: () => undefined } as never,
      limits: () => ({ pages: 4, actionMs: 5000, downloadBytes: 1024 }), workspace: () => new Workspace(join(dir, 'workspace')),
      downloadsDir: downloads, onClosed: () => undefined, kill: () => undefined,
    });
  });
  afterEach(async () => {
    await session.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const settled = async () => {
    for (let i = 0; i < 50 && (session as unknown as { downloading: Set<unknown> }).downloading.size > 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  };

  it('keeps a regular file under its name in downloads/', async () => {
    writeFileSync(join(downloads, 'guid-1'), 'report');
    page.emit('download', fakeDownload(join(downloads, 'guid-1'), 'report.txt'));
    await settled();
    expect(kept().map((download) => download.path)).to.deep.equal(['downloads/report.txt']);
    expect(readFileSync(join(dir, 'workspace', 'downloads', 'report.txt'), 'utf8')).to.equal('report');
  });

  it('refuses a link the sandbox put in its place (to a file of the host), a file outside its folder, and one past the bound', async () => {
    const secret = join(dir, 'secret.json');
    writeFileSync(secret, '{"gateway.token":"TOP-SECRET"}');
    symlinkSync(secret, join(downloads, 'guid-2'));
    page.emit('download', fakeDownload(join(downloads, 'guid-2'), 'loot.txt'));
    page.emit('download', fakeDownload(secret, 'outside.txt'));
    writeFileSync(join(downloads, 'guid-3'), Buffer.alloc(2048));
    page.emit('download', fakeDownload(join(downloads, 'guid-3'), 'big.bin'));
    await settled();
    expect(kept()).to.deep.equal([]);
    expect(notes().join('\n')).to.match(/loot\.txt could not be kept/).and.match(/outside\.txt could not be kept/).and.match(/big\.bin was dropped: 2048 bytes/);
    for (const name of ['loot.txt', 'outside.txt', 'big.bin']) expect(existsSync(join(dir, 'workspace', 'downloads', name)), name).to.equal(false);
  });
});
