import { expect } from 'chai';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LogFile } from '../../../src/server/log-file.ts';
import { parseFrame } from '../../../src/shared/protocol/frames.ts';
import { lastLines, renderLogLine } from '../../../src/cli/log-tail.ts';

describe('log file', () => {
  it('rotates by size and keeps at most maxFiles old files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gateway-log-'));
    try {
      const path = join(dir, 'gateway.log');
      const file = new LogFile({ path, maxBytes: 100, maxFiles: 2 });
      for (let index = 0; index < 20; index++) file.write(`${JSON.stringify({ msg: `line ${index}`, pad: 'x'.repeat(20) })}\n`);
      file.close();
      expect(existsSync(`${path}.1`)).to.equal(true);
      expect(existsSync(`${path}.2`)).to.equal(true);
      expect(existsSync(`${path}.3`)).to.equal(false);
      expect(readFileSync(path, 'utf8')).to.include('line 19');
      expect(lastLines(path, 1)[0]).to.include('line 19');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('renders pino lines for people and passes other lines through', () => {
    const line = JSON.stringify({ level: 40, time: '2026-01-02T03:04:05.678Z', pid: 1, profile: 'default', msg: 'careful', port: 1 });
    expect(renderLogLine(line)).to.equal('2026-01-02 03:04:05Z WARN  careful port=1');
    expect(renderLogLine('plain text')).to.equal('plain text');
  });
});

describe('protocol frames', () => {
  it('accepts well-formed frames only', () => {
    expect(parseFrame('{"type":"req","id":"1","method":"status"}')).to.deep.equal({ type: 'req', id: '1', method: 'status' });
    expect(parseFrame('{"type":"res","id":"1","ok":true}')).to.include({ ok: true });
    expect(parseFrame('{"type":"event","event":"tick"}')).to.include({ event: 'tick' });
    for (const text of ['', 'null', '[]', '{"type":"req","id":"","method":"x"}', '{"type":"req","id":"1"}', '{"type":"other"}', '{']) {
      expect(parseFrame(text), text).to.equal(undefined);
    }
  });
});
