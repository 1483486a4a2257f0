import { expect } from 'chai';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { commandFlags, GENERATED, publicCommands, readManifest, regenerated } from '../../scripts/docs.ts';
import { leafKeys } from '../../src/shared/config/keys.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
const DOCS = readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`);

/** GitHub's anchor for a heading. */
const slug = (heading: string) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\- ]/gu, '').replace(/ /g, '-');

/** The part of a Markdown file under a heading, up to the next heading of its level or above. */
function section(text: string, heading: string): string | undefined {
  const lines = text.split('\n');
  const start = lines.findIndex((line) => line === heading);
  if (start === -1) return undefined;
  const level = heading.indexOf(' ');
  const end = lines.findIndex((line, index) => index > start && /^#+ /.test(line) && line.indexOf(' ') <= level);
  return lines.slice(start, end === -1 ? undefined : end).join('\n');
}

describe('the documentation', () => {
  const manifest = readManifest();

  it('has its generated reference up to date with the commands and the settings (npm run docs)', () => {
    for (const file of Object.keys(GENERATED) as (keyof typeof GENERATED)[]) {
      expect(regenerated(file, manifest) === read(file), `${file} is out of date: run npm run docs`).to.equal(true);
    }
  });

  it('shows in docs/architecture.md a worked example that is the module the tests compose, so it compiles and runs', () => {
    const text = readFileSync(join(ROOT, 'docs', 'architecture.md'), 'utf8');
    const start = text.indexOf('A worked example (the whole feature):');
    const block = /```ts\n([\s\S]*?)```/.exec(text.slice(start))?.[1];
    expect(block, 'the worked example').to.be.a('string');
    const fixture = readFileSync(join(ROOT, 'test', 'fixtures', 'modules', 'greetings', 'module.ts'), 'utf8');
    const asInTheSources = fixture.replace(/^\/\*\*[\s\S]*?\*\/\n/, '').replaceAll("'../../../../src/server/", "'../");
    expect(block!.split('\n').filter((line) => !line.startsWith('// ')).join('\n')).to.equal(asInTheSources);
  });

  it('describes every command and every flag of each in docs/cli.md', () => {
    const cli = read('docs/cli.md');
    const commands = publicCommands(manifest);
    expect(commands.length).to.be.above(60);
    for (const command of commands) {
      const name = command.id.split(':').join(' ');
      const part = section(cli, `### \`gateway ${name}\``) ?? section(cli, `#### \`gateway ${name}\``);
      expect(part, `gateway ${name} is missing from docs/cli.md`).to.not.equal(undefined);
      for (const flag of commandFlags(command)) expect(part, `gateway ${name} --${flag.name}`).to.include(`--${flag.allowNo ? '[no-]' : ''}${flag.name}`);
      for (const arg of Object.keys(command.args)) expect(part, `gateway ${name} <${arg}>`).to.include(`\`${arg}\``);
    }
    // The flags every command takes, once at the head.
    for (const flag of ['--profile', '--json', '--url']) expect(cli.slice(0, cli.indexOf('## Reference'))).to.include(flag);
  });

  it('describes every setting in docs/configuration.md', () => {
    const configuration = read('docs/configuration.md');
    const keys = leafKeys();
    expect(keys.length).to.be.above(80);
    for (const key of keys) expect(configuration, key).to.include(`\`${key}\``);
    // Any other channel id (a plugin's channel) takes the keys of the generic entry.
    expect(configuration).to.include('`channels.<id>.enabled`');
  });

  it('uses only commands and flags that exist in its examples', () => {
    const commands = new Map(publicCommands(manifest).map((command) => [command.id.split(':').join(' '), command]));
    const topics = new Set([...commands.keys()].filter((id) => id.includes(' ')).map((id) => id.split(' ')[0]!));
    let checked = 0;
    for (const file of ['README.md', ...DOCS]) {
      const blocks = read(file).match(/```(?:sh|bash)\n[\s\S]*?```/g) ?? [];
      for (const line of blocks.flatMap((block) => block.split('\n'))) {
        for (const match of line.matchAll(/(?:^|[|;&(]\s*|sudo\s+)gateway\s+([a-z][a-z-]*(?:\s+[a-z][a-z-]*){0,2})/g)) {
          const words = match[1]!.split(/\s+/);
          // The longest run of words that names a command; a topic alone (gateway profiles) is a command too.
          const named = [3, 2, 1].map((count) => words.slice(0, count).join(' ')).find((candidate) => commands.has(candidate) || topics.has(candidate));
          expect(named, `${file}: ${line.trim()}`).to.not.equal(undefined);
          const command = commands.get(named!);
          if (!command) continue;
          // Its flags, up to the end of this command (a comment, a pipe, the next command).
          const rest = line.slice(match.index! + match[0].length).split(/\s(?:#|\||&&|;|\|\|)\s?/)[0]!;
          const known = new Set(['help', ...Object.values(command.flags).flatMap((flag) => [flag.name, ...(flag.aliases ?? []), ...(flag.allowNo ? [`no-${flag.name}`] : [])])]);
          for (const [, flag] of rest.matchAll(/(?:^|\s)--([a-z][a-z-]*)/g)) {
            expect(known.has(flag!), `${file}: gateway ${named} has no --${flag}: ${line.trim()}`).to.equal(true);
            checked++;
          }
        }
      }
    }
    expect(checked).to.be.above(50);
  });

  it('has a README that is a front door: the two commands, a first agent on a first channel, and a link to every topic', () => {
    const readme = read('README.md');
    const words = readme.split(/\s+/).length;
    expect(words, 'a page a newcomer reads in five minutes').to.be.below(1500);
    expect(readme).to.include('scripts/install.sh').and.include('bash .ci/run');
    for (const doc of DOCS) expect(readme, doc).to.include(`](${doc})`);
  });

  it('links only to files and headings that exist', () => {
    for (const file of ['README.md', ...DOCS]) {
      const text = read(file);
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const [path, anchor] = target!.split('#') as [string, string | undefined];
        const linked = path ? join(dirname(join(ROOT, file)), path) : join(ROOT, file);
        expect(existsSync(linked), `${file} links to ${target}`).to.equal(true);
        if (anchor && linked.endsWith('.md')) {
          const headings = readFileSync(linked, 'utf8').split('\n').filter((line) => /^#+ /.test(line)).map((line) => slug(line.replace(/^#+ /, '')));
          expect(headings, `${file} links to ${target}`).to.include(anchor);
        }
      }
    }
  });
});
