import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, Home } from '../support/cli.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../support/scripted-upstream.ts';

const SKILL = `---
name: weather-report
description: >
  Writes a short weather report for a city. Use when someone asks about
  the weather.
license: MIT
metadata:
  author: acme
---

# Weather report

1. Read references/style.md for the house style.
2. Run scripts/report.sh <city> and pass on what it prints.
`;

/** A skill folder as an author keeps it: instructions, a script, a reference, and a link to a file inside. */
function makeSkill(root: string, name = 'weather-report', body = SKILL): string {
  const folder = join(root, name);
  mkdirSync(join(folder, 'scripts'), { recursive: true });
  mkdirSync(join(folder, 'references'), { recursive: true });
  writeFileSync(join(folder, 'SKILL.md'), body);
  writeFileSync(join(folder, 'scripts', 'report.sh'), '#!/bin/sh\necho "Sunny in ${1:-nowhere}, 21 C"\n');
  chmodSync(join(folder, 'scripts', 'report.sh'), 0o755);
  writeFileSync(join(folder, 'references', 'style.md'), 'Keep it under twenty words.\n');
  symlinkSync('references/style.md', join(folder, 'STYLE.md'));
  return folder;
}

describe('skills: added from a folder, an archive and a git repository, refused when hostile, used by an agent in its sandbox (e2e)', function () {
  this.timeout(120_000);
  let home: Home;
  let work: string;
  let upstream: ScriptedUpstream;

  const add = (source: string, ...flags: string[]) => home.run(['skills', 'add', source, ...flags, '--json']);

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'skills-'));
    upstream = await new ScriptedUpstream().start();
    const port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    await home.set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await home.set('agents.helper', { model: 'script/m', toolProfile: 'coding', tools: ['skills.*'], skills: ['weather-report'] });
    await home.set('agents.plain', { model: 'script/m', toolProfile: 'coding', tools: ['skills.*'] });
    await home.set('gateway.tools.allow', ['exec', 'files.write']);
    await home.set('tools.exec.approval', 'full');
    expect((await home.run(['start'])).code).to.equal(0);
  });
  after(async () => {
    home?.cleanup();
    await upstream?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('adds a skill from a folder (a link inside kept as a copy), lists and shows it, and replaces it only when asked', async () => {
    const folder = makeSkill(join(work, 'folder'));
    const added = await add(folder);
    expect(added.code, added.stderr).to.equal(0);
    expect(added.json).to.include({ name: 'weather-report', status: 'installed', files: 4 });
    expect(added.json.source).to.equal(`folder ${folder}`);

    const listed = await home.json(['skills', 'list']);
    expect(listed.skills.map((skill: any) => skill.name)).to.deep.equal(['weather-report']);
    expect(listed.skills[0].description).to.equal('Writes a short weather report for a city. Use when someone asks about the weather.');
    const shown = await home.json(['skills', 'show', 'weather-report']);
    expect(shown.agents).to.deep.equal(['helper']);
    expect(shown.license).to.equal('MIT');
    expect(shown.instructions).to.match(/^# Weather report/);
    expect(shown.entries).to.deep.include({ path: 'scripts/report.sh', size: 46, executable: true });
    expect(shown.entries).to.deep.include({ path: 'STYLE.md', size: 28, executable: false });

    const again = await add(folder);
    expect(again.code).to.equal(1);
    expect(again.stderr).to.include('A skill named weather-report is installed already: add it with --replace');
    expect((await add(folder, '--replace')).code).to.equal(0);
    // Kept whole in the profile, readable by the sandbox's user; nothing of the staging left.
    const kept = join(home.file('config.json'), '..', 'skills');
    expect(readFileSync(join(kept, 'weather-report', 'STYLE.md'), 'utf8')).to.equal('Keep it under twenty words.\n');
    expect(execFileSync('ls', ['-A', kept], { encoding: 'utf8' }).split('\n').filter(Boolean).sort()).to.deep.equal(['.meta', 'weather-report']);
  });

  it('adds from a .tar.gz, a .zip (one top folder unwrapped) and a local git repository', async () => {
    const root = join(work, 'archives');
    makeSkill(root, 'tar-skill', SKILL.replace('weather-report', 'tar-skill'));
    execFileSync('tar', ['czf', join(work, 'skill.tar.gz'), '-C', root, 'tar-skill']);
    const fromTar = await add(join(work, 'skill.tar.gz'));
    expect(fromTar.code, fromTar.stderr).to.equal(0);
    expect(fromTar.json).to.include({ name: 'tar-skill', files: 4 });

    makeSkill(root, 'zip-skill', SKILL.replace('weather-report', 'zip-skill'));
    execFileSync('python3', ['-c', `import shutil; shutil.make_archive(${JSON.stringify(join(work, 'skill'))}, 'zip', ${JSON.stringify(root)}, 'zip-skill')`]);
    const fromZip = await add(join(work, 'skill.zip'));
    expect(fromZip.code, fromZip.stderr).to.equal(0);
    expect(fromZip.json).to.include({ name: 'zip-skill' });
    const zipped = await home.json(['skills', 'show', 'zip-skill']);
    expect(zipped.entries.find((entry: any) => entry.path === 'scripts/report.sh').executable).to.equal(true);

    const repo = makeSkill(join(work, 'repo'), 'git-skill', SKILL.replace('weather-report', 'git-skill'));
    const git = (...args: string[]) => execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args]);
    git('init', '-q');
    // A hook in the repository: cloning must never run it.
    git('add', '.');
    git('commit', '-qm', 'skill');
    const fromGit = await add(`file://${repo}`);
    expect(fromGit.code, fromGit.stderr).to.equal(0);
    expect(fromGit.json).to.include({ name: 'git-skill', files: 4 });
    expect(fromGit.json.source).to.equal(`git file://${repo}`);
    expect((await home.json(['skills', 'show', 'git-skill'])).entries.map((entry: any) => entry.path)).not.to.include('.git');
  });

  it('refuses hostile skills with their reason, keeping nothing: links out, huge files, paths out of archives, bad front matter', async () => {
    const hostile = join(work, 'hostile');
    const linked = makeSkill(hostile, 'linked', SKILL.replace('weather-report', 'linked'));
    symlinkSync('/etc/passwd', join(linked, 'references', 'passwd'));
    const out = await add(linked);
    expect(out.code).to.equal(2);
    expect(out.stderr).to.include('references/passwd is a link leaving the skill (to /etc/passwd)');

    const big = makeSkill(hostile, 'big', SKILL.replace('weather-report', 'big'));
    writeFileSync(join(big, 'assets.bin'), Buffer.alloc(5 * 1024 * 1024));
    expect((await add(big)).stderr).to.include('assets.bin is larger than 4 MB');

    // A zip whose entry climbs out, and a tar naming an absolute path: refused before anything is written.
    execFileSync('python3', ['-c', `import zipfile
z = zipfile.ZipFile(${JSON.stringify(join(work, 'evil.zip'))}, 'w')
z.writestr('SKILL.md', '---\\nname: evil\\ndescription: x\\n---\\n')
z.writestr('../../escaped.txt', 'gotcha')
z.close()`]);
    const evilZip = await add(join(work, 'evil.zip'));
    expect(evilZip.code).to.equal(2);
    expect(evilZip.stderr).to.include('is not a plain relative path inside the skill');
    execFileSync('python3', ['-c', `import tarfile, io
t = tarfile.open(${JSON.stringify(join(work, 'evil.tar.gz'))}, 'w:gz')
for name, data in [('SKILL.md', b'---\\nname: evil\\ndescription: x\\n---\\n'), ('/tmp/escaped.txt', b'gotcha')]:
    info = tarfile.TarInfo(name); info.size = len(data); t.addfile(info, io.BytesIO(data))
t.close()`]);
    const evilTar = await add(join(work, 'evil.tar.gz'));
    expect(evilTar.code).to.equal(2);
    expect(evilTar.stderr).to.include('The archive names an absolute path');
    // A zip bomb: a small archive declaring a small file that unpacks to far more.
    execFileSync('python3', ['-c', `import zipfile
z = zipfile.ZipFile(${JSON.stringify(join(work, 'bomb.zip'))}, 'w', zipfile.ZIP_DEFLATED)
z.writestr('SKILL.md', '---\\nname: bomb\\ndescription: x\\n---\\n')
z.writestr('zeros.bin', b'\\0' * (64 * 1024 * 1024))
z.close()`]);
    expect((await add(join(work, 'bomb.zip'))).stderr).to.include('zeros.bin is larger than 4 MB');

    const bare = join(hostile, 'bare');
    mkdirSync(bare);
    writeFileSync(join(bare, 'SKILL.md'), '# no front matter\n');
    expect((await add(bare)).stderr).to.include('SKILL.md must start with YAML front matter');
    writeFileSync(join(bare, 'SKILL.md'), '---\nname: Bad_Name\ndescription: x\n---\n');
    expect((await add(bare)).stderr).to.include('must be 1-64 lowercase letters, digits and single hyphens');
    writeFileSync(join(bare, 'SKILL.md'), '---\nname: x\ndescription: !!js/function "function () {}"\n---\n');
    expect((await add(bare)).stderr).to.include('front matter is not valid YAML');

    expect(existsSync('/tmp/escaped.txt')).to.equal(false);
    const names = (await home.json(['skills', 'list'])).skills.map((skill: any) => skill.name);
    expect(names).not.to.include.members(['linked', 'big', 'evil', 'bomb', 'x']);
  });

  it('an agent loads a skill, reads its files and runs its script in the sandbox, where the skill is read-only', async () => {
    upstream.reset();
    upstream.enqueue(
      openaiToolCalls([{ name: 'skills_load', args: { name: 'weather-report' } }]),
      openaiToolCalls([{ name: 'files_read', args: { path: 'skills/weather-report/references/style.md' } }]),
      openaiToolCalls([{ name: 'exec', args: { command: 'sh skills/weather-report/scripts/report.sh Lisbon; echo tamper > skills/weather-report/SKILL.md; echo exit=$?' } }]),
      openaiToolCalls([{ name: 'files_write', args: { path: 'skills/weather-report/SKILL.md', content: 'owned' } }]),
      openaiText('Sunny in Lisbon, 21 C.'),
    );
    const chat = await home.run(['chat', '--agent', 'helper', 'What is the weather in Lisbon?', '--json']);
    expect(chat.code, chat.stderr).to.equal(0);
    expect(chat.json.text).to.equal('Sunny in Lisbon, 21 C.');
    const seen = (index: number) => JSON.stringify(upstream.requests[index]!.body.messages.at(-1));
    // The model was told of the skill by its name and description, in the system text.
    const system = upstream.requests[0]!.body.messages.find((message: any) => message.role === 'system');
    expect(system.content).to.include('- weather-report: Writes a short weather report for a city. Use when someone asks about the weather.');
    expect(seen(1)).to.include('# Weather report').and.to.include('Run scripts/report.sh');
    expect(seen(2)).to.include('Keep it under twenty words.');
    expect(seen(3)).to.include('Sunny in Lisbon, 21 C').and.to.include('Read-only file system').and.to.include('exit=');
    expect(seen(4)).to.include('Skills are read-only');
    const kept = join(home.file('config.json'), '..', 'skills', 'weather-report', 'SKILL.md');
    expect(readFileSync(kept, 'utf8')).to.equal(SKILL);
  });

  it('an agent without the skill can neither load it nor see it under skills/', async () => {
    upstream.reset();
    upstream.enqueue(
      openaiToolCalls([{ name: 'skills_load', args: { name: 'weather-report' } }]),
      openaiText('I cannot.'),
    );
    const chat = await home.run(['chat', '--agent', 'plain', 'Use the weather skill', '--json']);
    expect(chat.code, chat.stderr).to.equal(0);
    expect(JSON.stringify(upstream.requests[1]!.body.messages.at(-1))).to.include('This agent may use no skill');
  });

  it('an agent writes a skill: a draft until an operator approves it', async () => {
    upstream.reset();
    upstream.enqueue(
      openaiToolCalls([{ name: 'skills_write', args: { name: 'city-lookup', description: 'Looks up a city.', instructions: '# City lookup\nRun scripts/find.sh.', files: [{ path: 'scripts/find.sh', content: '#!/bin/sh\necho found\n', executable: true }] } }]),
      openaiText('I wrote a skill for next time.'),
    );
    const chat = await home.run(['chat', '--agent', 'helper', 'Remember how to look up cities', '--json']);
    expect(chat.code, chat.stderr).to.equal(0);
    const listed = await home.json(['skills', 'list']);
    expect(listed.skills.map((skill: any) => skill.name)).not.to.include('city-lookup');
    expect(listed.drafts).to.have.length(1);
    expect(listed.drafts[0]).to.include({ name: 'city-lookup', status: 'draft', by: 'agent:helper', files: 2 });
    const draft = await home.json(['skills', 'show', 'city-lookup', '--draft']);
    expect(draft.instructions).to.equal('# City lookup\nRun scripts/find.sh.');
    const approved = await home.run(['skills', 'approve', 'city-lookup', '--json']);
    expect(approved.code, approved.stderr).to.equal(0);
    const after = await home.json(['skills', 'list']);
    expect(after.skills.map((skill: any) => skill.name)).to.include('city-lookup');
    expect(after.drafts).to.deep.equal([]);
    expect((await home.run(['skills', 'remove', 'city-lookup'])).code).to.equal(0);
    const missing = await home.run(['skills', 'show', 'city-lookup']);
    expect(missing.code).to.equal(5);
    const audit = await home.run(['audit', '--json']);
    expect(audit.stdout).to.include('skill.drafted').and.to.include('skill.approved').and.to.include('skill.removed');
  });
});
