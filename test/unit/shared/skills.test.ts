import { expect } from 'chai';
import { deflateRawSync } from 'node:zlib';
import { readTar, readZip } from '../../../src/cli/skill-source.ts';
import { checkSkill, checkSkillPath, parseSkill, SkillProblem, type SkillFile } from '../../../src/shared/skills.ts';

const front = (body: string) => `---\n${body}\n---\n# Steps\nDo it.\n`;
const problem = (work: () => unknown): string => {
  try {
    work();
  } catch (error) {
    expect(error).to.be.instanceOf(SkillProblem);
    return (error as Error).message;
  }
  throw new Error('expected a refusal');
};
const file = (path: string, text = 'x', executable = false): SkillFile => ({ path, data: Buffer.from(text), executable });

/** A tar archive built by hand: each entry a 512-byte ustar header (checksum and all) and its data padded to 512. */
function tar(entries: { name: string; type?: string; data?: string; link?: string; mode?: number; prefix?: string }[]): Buffer {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    const data = Buffer.from(entry.data ?? '');
    const header = Buffer.alloc(512);
    header.write(entry.name, 0, 100);
    header.write(`${(entry.mode ?? 0o644).toString(8).padStart(7, '0')}\0`, 100);
    header.write('0000000\0', 108);
    header.write('0000000\0', 116);
    header.write(`${data.length.toString(8).padStart(11, '0')}\0`, 124);
    header.write('00000000000\0', 136);
    header.write('        ', 148);
    header.write(entry.type ?? '0', 156);
    header.write(entry.link ?? '', 157, 100);
    header.write('ustar\0', 257);
    header.write('00', 263);
    header.write(entry.prefix ?? '', 345, 155);
    let sum = 0;
    for (const byte of header) sum += byte;
    header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
    blocks.push(header, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

/** A zip archive built by hand: local headers, the central directory and its end record. */
function zip(entries: { name: string; data: string; mode?: number; declared?: number; deflate?: boolean }[]): Buffer {
  const locals: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const raw = Buffer.from(entry.data);
    const stored = entry.deflate ? deflateRawSync(raw) : raw;
    const name = Buffer.from(entry.name);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(entry.deflate ? 8 : 0, 8);
    local.writeUInt32LE(stored.length, 18);
    local.writeUInt32LE(entry.declared ?? raw.length, 22);
    local.writeUInt16LE(name.length, 26);
    const record = Buffer.alloc(46);
    record.writeUInt32LE(0x02014b50, 0);
    record.writeUInt16LE(entry.deflate ? 8 : 0, 10);
    record.writeUInt32LE(stored.length, 20);
    record.writeUInt32LE(entry.declared ?? raw.length, 24);
    record.writeUInt16LE(name.length, 28);
    record.writeUInt32LE(((entry.mode ?? 0o100644) << 16) >>> 0, 38);
    record.writeUInt32LE(offset, 42);
    locals.push(local, name, stored);
    central.push(record, name);
    offset += 30 + name.length + stored.length;
  }
  const directory = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

describe('skills: the format and its bounds, archives read in process (unit)', () => {
  it('reads SKILL.md\'s front matter (folded text, metadata, licence) and keeps the instructions', () => {
    const skill = parseSkill(front('name: pdf-forms\ndescription: >\n  Fills PDF forms.\n  Use for any form.\nlicense: MIT\nallowed-tools: exec\nmetadata:\n  version: 2\n  author: acme'));
    expect(skill).to.deep.equal({
      name: 'pdf-forms', description: 'Fills PDF forms. Use for any form.', instructions: '# Steps\nDo it.', license: 'MIT', allowedTools: 'exec',
      metadata: { version: '2', author: 'acme' },
    });
  });

  it('refuses names the format does not allow, a missing description and a folder that does not match', () => {
    for (const name of ['Upper', 'two--hyphens', '-lead', 'trail-', 'under_score', 'x'.repeat(65), '']) {
      expect(problem(() => parseSkill(front(`name: "${name}"\ndescription: d`))), name).to.include('must be 1-64 lowercase letters');
    }
    expect(parseSkill(front('name: a\ndescription: d')).name).to.equal('a');
    expect(problem(() => parseSkill(front('name: ok')))).to.include('needs a description');
    expect(problem(() => parseSkill(front(`name: ok\ndescription: ${'d'.repeat(1025)}`)))).to.include('longer than 1024 characters');
    expect(problem(() => parseSkill(front('name: ok\ndescription: d'), 'other'))).to.include('its folder is "other"');
  });

  it('refuses front matter that is not a plain mapping, and YAML tags that would build code or vast values', () => {
    expect(problem(() => parseSkill('# Title only'))).to.include('must start with YAML front matter');
    expect(problem(() => parseSkill(front('- a\n- b')))).to.include('must be a mapping');
    expect(problem(() => parseSkill(front('name: ok\ndescription: !!js/function "function(){}"')))).to.include('not valid YAML');
    const laughs = 'a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]';
    expect(problem(() => parseSkill(front(`name: ok\ndescription: d\nmetadata:\n  ${laughs.replaceAll('\n', '\n  ')}`)))).to.include('metadata.a must be text');
  });

  it('takes only plain relative paths inside the skill', () => {
    expect(checkSkillPath('scripts/run.sh')).to.equal('scripts/run.sh');
    for (const path of ['../x', 'a/../../x', '/etc/passwd', 'a//b', './a', 'a\\b', 'a\nb', '', `${'a/'.repeat(10)}x`]) {
      expect(problem(() => checkSkillPath(path)), JSON.stringify(path)).to.match(/not a plain relative path|empty, too long or too deep/);
    }
  });

  it('a whole skill: SKILL.md at its top, no path twice, none both file and folder, within its counts and sizes', () => {
    const md = file('SKILL.md', front('name: ok\ndescription: d'));
    expect(checkSkill([md, file('scripts/a.sh', 'echo', true)]).name).to.equal('ok');
    expect(problem(() => checkSkill([file('README.md')]))).to.include('no SKILL.md at its top');
    expect(problem(() => checkSkill([md, file('a'), file('a')]))).to.include('holds a twice');
    expect(problem(() => checkSkill([md, file('a'), file('a/b')]))).to.include('a is both a file and a folder');
    expect(problem(() => checkSkill([md, { path: 'big.bin', data: Buffer.alloc(4 * 1024 * 1024 + 1), executable: false }]))).to.include('big.bin is larger than 4 MB');
    expect(problem(() => checkSkill([md, ...Array.from({ length: 500 }, (_, index) => file(`f${index}`))]))).to.include('more than 500 files');
    const three = Array.from({ length: 3 }, (_, index) => ({ path: `part${index}`, data: Buffer.alloc(3 * 1024 * 1024), executable: false }));
    expect(problem(() => checkSkill([md, ...three]))).to.include('larger than 8 MB');
  });

  it('reads a tar: files with their run bit, folders skipped, a long name by prefix, a link inside kept as a copy', () => {
    const files = readTar(tar([
      { name: 'skill/', type: '5' }, { name: 'skill/SKILL.md', data: 'md' }, { name: 'run.sh', prefix: 'skill/scripts', data: 'echo', mode: 0o755 },
      { name: 'skill/copy.sh', type: '2', link: 'scripts/run.sh' },
    ]));
    expect(files.map((entry) => [entry.path, entry.data.toString(), entry.executable])).to.deep.equal([
      ['skill/SKILL.md', 'md', false], ['skill/scripts/run.sh', 'echo', true], ['skill/copy.sh', 'echo', true],
    ]);
  });

  it('refuses a tar with a link leaving, an absolute path, a device, or cut short', () => {
    expect(problem(() => readTar(tar([{ name: 'SKILL.md', data: 'x' }, { name: 'out', type: '2', link: '../../etc/passwd' }])))).to.include('out is a link leaving the skill');
    expect(problem(() => readTar(tar([{ name: 'abs', type: '2', link: '/etc/passwd' }])))).to.include('link leaving the skill');
    expect(problem(() => readTar(tar([{ name: 'dangling', type: '2', link: 'nothing' }])))).to.include('which is no file of the skill');
    expect(problem(() => readTar(tar([{ name: '/etc/cron.d/x', data: 'x' }])))).to.include('absolute path');
    expect(problem(() => readTar(tar([{ name: 'dev', type: '3' }])))).to.include('not a file, folder or link');
    expect(problem(() => readTar(tar([{ name: 'SKILL.md', data: 'x'.repeat(600) }]).subarray(0, 700)))).to.include('cut short');
  });

  it('reads a zip (stored and deflated), and refuses one whose entry climbs out, lies about its size, or is a link out', () => {
    const files = readZip(zip([{ name: 'SKILL.md', data: 'md' }, { name: 'scripts/run.sh', data: 'echo hi', deflate: true, mode: 0o100755 }]));
    expect(files.map((entry) => [entry.path, entry.data.toString(), entry.executable])).to.deep.equal([['SKILL.md', 'md', false], ['scripts/run.sh', 'echo hi', true]]);
    expect(problem(() => readZip(zip([{ name: '../escape', data: 'x' }])))).to.include('not a plain relative path');
    expect(problem(() => readZip(zip([{ name: 'bomb', data: 'x'.repeat(100_000), deflate: true, declared: 10 }])))).to.include('does not unpack to the size the archive says');
    expect(problem(() => readZip(zip([{ name: 'link', data: '/etc/passwd', mode: 0o120777 }])))).to.include('link leaving the skill');
    expect(problem(() => readZip(Buffer.from('not a zip at all')))).to.include('not a zip archive');
  });
});
