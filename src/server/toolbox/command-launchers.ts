/**
 * The words of a command that make it run another command of the caller's
 * choosing: a shell's or an interpreter's code, a wrapper's program, the
 * options that name a program to start (git -c, ssh -o ProxyCommand, find
 * -exec, tar --to-command, rsync -e...). exec's allowlist lets a broad
 * pattern (`git *`) cover none of them: each must be written out in the
 * pattern. The table below is the one docs/security.md describes; a program
 * missing from it is matched by its words alone.
 */

/** Word index (0 is the program) -> why that word runs another command. */
export type Launching = Map<number, string>;

/** Options that name a program or code to run, and how they are spelled. */
interface OptionSpec {
  /** Long options without their dashes: --name, --name=value and every abbreviation (--na) count. */
  long?: string[];
  /** Short option letters: counted anywhere in a bundle (-xzI). */
  short?: string;
  /** Single-dash options matched from their start (-exec, -wrapper, -Wl,): the word, or a word beginning with one. */
  prefixes?: string[];
  /** Every word from the first of these options to the end (find's actions take the rest of the line). */
  restAfter?: string[];
  /** Any other word that runs something (a transport URL, a host:path). */
  word?: (word: string) => string | undefined;
}

/** An interpreter's options: how to tell where the code it runs is named. */
interface InterpreterSpec {
  /** Option words (or bundles) that take no value. */
  flags: RegExp;
  /** Options whose next word is their value (a setting, a module to load). */
  values?: string[];
  /** Options whose next word is code; the options go on after it. */
  code?: string[];
  /** Options whose next word is code and which end the options (python -c, -m). */
  ends?: string[];
  /** The options go on after the first operand (so a later -f or -e still counts). */
  permutes?: boolean;
}

type Rule = (words: readonly string[], launching: Launching) => void;

const mark = (launching: Launching, index: number, why: string) => {
  if (!launching.has(index)) launching.set(index, why);
};
const markFrom = (words: readonly string[], launching: Launching, from: number, why: string) => {
  for (let i = from; i < words.length; i++) mark(launching, i, why);
};

/** Every argument runs or chooses what runs: only a pattern that writes them all out matches. */
const everything = (why: string): Rule => (words, launching) => markFrom(words, launching, 1, why);

/** Marks the option words of a spec (and a separate value after one) from index `from`. */
function options(spec: OptionSpec, why: string, from = 1): Rule {
  return (words, launching) => {
    for (let i = from; i < words.length; i++) {
      const word = words[i]!;
      if (spec.restAfter?.includes(word)) {
        markFrom(words, launching, i, why);
        return;
      }
      const other = spec.word?.(word);
      if (other) mark(launching, i, other);
      if (word.startsWith('--') && word.length > 2) {
        const [name] = word.slice(2).split('=', 1) as [string];
        // getopt_long and git's parse-options take any unambiguous abbreviation of a long option.
        if (spec.long?.some((long) => long.startsWith(name))) {
          mark(launching, i, why);
          if (!word.includes('=')) mark(launching, i + 1, why);
        }
        continue;
      }
      if (!word.startsWith('-') || word === '-') continue;
      const prefix = spec.prefixes?.find((start) => word.startsWith(start));
      if (prefix) {
        mark(launching, i, why);
        if (word === prefix) mark(launching, i + 1, why);
        continue;
      }
      const letters = word.slice(1);
      if (spec.short && [...spec.short].some((letter) => letters.includes(letter))) {
        mark(launching, i, why);
        if (spec.short.includes(letters.at(-1)!)) mark(launching, i + 1, why);
      }
    }
  };
}

/**
 * An interpreter runs the code its arguments name: every word up to and
 * including the script (or the code of -c, -e...) must be written out; the
 * words after the script are the script's own arguments. An option it does
 * not know might take the next word, so from there everything counts.
 */
function interpreter(spec: InterpreterSpec, why: string): Rule {
  return (words, launching) => {
    let code = false;
    let i = 1;
    for (; i < words.length; i++) {
      const word = words[i]!;
      // The first operand is the script, unless -e or the like gave the code: then it is the code's first argument.
      if (word === '-' || !/^[-+]/.test(word)) {
        if (!code) mark(launching, i, why);
        i++;
        break;
      }
      mark(launching, i, why);
      if (word === '--') {
        if (!code) mark(launching, i + 1, why);
        i += 2;
        break;
      }
      if (spec.ends?.includes(word)) {
        mark(launching, i + 1, why);
        return;
      }
      if (spec.code?.includes(word)) {
        mark(launching, i + 1, why);
        code = true;
        i++;
        continue;
      }
      if (spec.values?.includes(word)) {
        mark(launching, i + 1, why);
        i++;
        continue;
      }
      if (spec.flags.test(word)) continue;
      markFrom(words, launching, i, why);
      return;
    }
    if (!spec.permutes) return;
    const later = words.findIndex((word, index) => index >= i && word.startsWith('-'));
    if (later >= 0) markFrom(words, launching, later, why);
  };
}

const SHELL: InterpreterSpec = { flags: /^[-+][abcefhkmnptuvxBCEHPT]+$/, values: ['-o', '+o', '-O', '+O'] };
const PYTHON: InterpreterSpec = { flags: /^-[bBdEhiIOPqsSuvVx]+$/, values: ['-W', '-X', '--check-hash-based-pycs'], ends: ['-c', '-m'] };
const NODE: InterpreterSpec = {
  flags: /^(--[a-z0-9-]+=.*|--(no-warnings|no-deprecation|trace-warnings|enable-source-maps|preserve-symlinks|check)|-c)$/,
  values: ['-r', '--require', '--import', '--loader', '--experimental-loader', '--input-type', '-C', '--conditions'], code: ['-e', '--eval', '-p', '--print'],
};
const PERL: InterpreterSpec = { flags: /^-[wWtTnpaclsuU]+$/, code: ['-e', '-E'] };
const RUBY: InterpreterSpec = { flags: /^-[wvcnpal]+$/, code: ['-e'] };
const PHP: InterpreterSpec = { flags: /^-[nqHhv]+$/, values: ['-d', '-c'], code: ['-r'] };
const LUA: InterpreterSpec = { flags: /^-[iEW]+$/, values: ['-l'], code: ['-e'] };
const AWK: InterpreterSpec = {
  flags: /^(-F.+|-v[A-Za-z_][A-Za-z0-9_]*=.*|--(posix|traditional|lint|re-interval|characters-as-bytes|sandbox))$/, values: ['-v', '-F', '--assign', '--field-separator'],
  code: ['-f', '--file', '-e', '--source', '-E', '--exec', '-i', '--include', '-l', '--load'], permutes: true,
};

const SHELL_WHY = 'a shell runs whatever script or -c command it is given';
const INTERPRETER_WHY = 'an interpreter runs whatever code its arguments name (a script, -c, -e)';
const WRAPPER_WHY = 'it runs the program its arguments name';

/**
 * sed's script: safe only when every command in it is one of those that read
 * and print (no `e` command or s///e flag, which run a command; no w, W, r or
 * R, which write and read files the script names).
 */
function sedScriptProblem(script: string): string | undefined {
  const risky = 'a sed script doing more than print, delete and substitute may run a command (e, s///e) or write a file (w)';
  let i = 0;
  const skipBlanks = () => {
    while (i < script.length && /[\s;]/.test(script[i]!)) i++;
  };
  const delimited = (delimiter: string): boolean => {
    while (i < script.length && script[i] !== delimiter) {
      if (script[i] === '\\') i++;
      i++;
    }
    if (i >= script.length) return false;
    i++;
    return true;
  };
  const address = () => {
    if (/\d/.test(script[i] ?? '')) while (/[\d~]/.test(script[i] ?? '')) i++;
    else if (script[i] === '$') i++;
    else if (script[i] === '/') {
      i++;
      if (!delimited('/')) return false;
      while (/[IM]/.test(script[i] ?? '')) i++;
    }
    return true;
  };
  for (skipBlanks(); i < script.length; skipBlanks()) {
    if (!address()) return risky;
    if (script[i] === ',') {
      i++;
      if (script[i] === '+') i++;
      if (!address()) return risky;
    }
    if (script[i] === '!') i++;
    const command = script[i++];
    if (command === undefined) return risky;
    if ('pdDnNPqQgGhHxlz=}{'.includes(command)) continue;
    if (command === 's' || command === 'y') {
      const delimiter = script[i++];
      if (!delimiter || delimiter === '\\' || /\s/.test(delimiter)) return risky;
      if (!delimited(delimiter) || !delimited(delimiter)) return risky;
      if (command === 's') while (/[gpiImM0-9]/.test(script[i] ?? '')) i++;
      if (i < script.length && !/[\s;}]/.test(script[i]!)) return risky;
      continue;
    }
    return risky;
  }
  return undefined;
}

/** sed: -f (a script from a file) and any script that can run or write are covered only when written out. */
const sed: Rule = (words, launching) => {
  const fileWhy = 'sed -f reads a script that may run commands (e, s///e)';
  let scriptGiven = false;
  for (let i = 1; i < words.length; i++) {
    const word = words[i]!;
    const option = i;
    const script = (index: number, text: string | undefined) => {
      const problem = text === undefined ? 'sed -e needs its script' : sedScriptProblem(text);
      if (problem) {
        mark(launching, option, problem);
        mark(launching, index, problem);
      }
      scriptGiven = true;
    };
    if (word === '--') {
      if (!scriptGiven && i + 1 < words.length) script(i + 1, words[i + 1]);
      return;
    }
    if (word.startsWith('--')) {
      const [name, value] = word.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
      if (name.length > 0 && 'expression'.startsWith(name)) {
        if (value !== undefined) script(i, value);
        else script(++i, words[i]);
      } else if (name.length > 0 && 'file'.startsWith(name)) {
        markFrom(words, launching, i, fileWhy);
        return;
      } else if (!/^(quiet|silent|posix|debug|sandbox|follow-symlinks|null-data|zero-terminated|separate|unbuffered|regexp-extended|in-place(=.*)?|line-length=\d+|help|version)$/.test(word.slice(2))) {
        markFrom(words, launching, i, 'an option sed may read as more than it looks');
        return;
      }
      continue;
    }
    if (word.startsWith('-') && word !== '-') {
      // A bundle: -n, -E, -r, -s, -u, -z take nothing; -i takes the rest as a suffix; -e, -f and -l the rest or the next word.
      for (let j = 1; j < word.length; j++) {
        const letter = word[j]!;
        if ('nErsuz'.includes(letter)) continue;
        if (letter === 'i') break;
        if (letter === 'e') {
          if (j + 1 < word.length) script(i, word.slice(j + 1));
          else script(++i, words[i]);
          break;
        }
        if (letter === 'l') {
          if (j + 1 === word.length) i++;
          break;
        }
        markFrom(words, launching, i, letter === 'f' ? fileWhy : 'an option sed may read as more than it looks');
        return;
      }
      continue;
    }
    // GNU sed takes options after operands too: the first operand is the script only when no -e came.
    if (!scriptGiven) script(i, word);
  }
};

/** git's own commands: another word there is an alias (alias.x=!cmd runs a shell command) or an external git-x program. */
const GIT_COMMANDS = new Set(('add am annotate apply archive bisect blame branch bugreport bundle cat-file check-attr check-ignore check-mailmap check-ref-format '
  + 'checkout checkout-index cherry cherry-pick clean clone column commit commit-graph commit-tree config count-objects credential describe diagnose diff '
  + 'diff-files diff-index diff-tree difftool fetch fetch-pack filter-branch fmt-merge-msg for-each-ref for-each-repo format-patch fsck gc grep hash-object '
  + 'help hook index-pack init init-db instaweb interpret-trailers log ls-files ls-remote ls-tree mailinfo mailsplit maintenance merge merge-base merge-file '
  + 'merge-index merge-one-file merge-tree mergetool mktag mktree multi-pack-index mv name-rev notes pack-objects pack-refs patch-id prune pull push range-diff '
  + 'read-tree rebase reflog remote repack replace request-pull rerere reset restore rev-list rev-parse revert rm send-email send-pack shell shortlog show '
  + 'show-branch show-index show-ref sparse-checkout stage stash status stripspace submodule switch symbolic-ref tag unpack-objects update-index update-ref '
  + 'update-server-info var verify-commit verify-pack verify-tag version whatchanged worktree write-tree').split(' '));

/** Options before git's command that change nothing of what runs. Any other (-c, --config-env, --exec-path, -C, --git-dir, -p) counts with every word after it. */
const GIT_SAFE_GLOBAL = new Set(['--no-pager', '-P', '--version', '--help', '-h', '--no-optional-locks', '--literal-pathspecs', '--glob-pathspecs', '--noglob-pathspecs',
  '--icase-pathspecs', '--no-replace-objects', '--bare', '--no-lazy-fetch', '--no-advice']);

/** A transport URL git hands to a helper: ext:: runs a command, and any <helper>:: starts one. */
const gitTransport = (word: string) => (/^[A-Za-z][A-Za-z0-9+.-]*::/.test(word) || /^--[a-z-]+=[A-Za-z][A-Za-z0-9+.-]*::/.test(word) ? 'a <transport>:: URL makes git start a helper (ext:: runs a command)' : undefined);
const GIT_OUTPUT = 'git --output writes a file it names: .git/config written so makes the next git command run what it says';
const UPLOAD_PACK = 'git fetch, pull, clone and ls-remote --upload-pack (-u) name the program run for the other side';

/** git's commands with options that run a program of the caller's choosing; 'all' is a command whose arguments are commands or configuration. */
const GIT_SUBCOMMANDS: Record<string, OptionSpec & { why: string } | { all: string }> = {
  clone: { long: ['upload-pack', 'template', 'config'], short: 'uc', why: 'git clone --upload-pack, -u, --template (hooks) and -c/--config (configuration) choose what runs' },
  fetch: { long: ['upload-pack'], short: 'u', why: UPLOAD_PACK },
  pull: { long: ['upload-pack'], short: 'u', why: UPLOAD_PACK },
  'ls-remote': { long: ['upload-pack'], short: 'u', why: UPLOAD_PACK },
  'fetch-pack': { long: ['upload-pack', 'exec'], why: UPLOAD_PACK },
  push: { long: ['receive-pack', 'exec'], why: 'git push --receive-pack and --exec name the program run for the other side' },
  'send-pack': { long: ['receive-pack', 'exec'], why: 'git send-pack --receive-pack and --exec name the program run for the other side' },
  archive: { long: ['remote', 'exec'], short: 'o', why: 'git archive --remote and --exec name the program run for the other side; -o writes a file it names' },
  'format-patch': { short: 'o', why: 'git format-patch -o writes files where it is told (such as .git, whose configuration the next git command obeys)' },
  init: { long: ['template'], why: 'git init --template copies hooks that later run' },
  'init-db': { long: ['template'], why: 'git init --template copies hooks that later run' },
  rebase: { long: ['exec'], short: 'x', why: 'git rebase --exec (-x) runs a shell command after each commit' },
  difftool: { long: ['extcmd'], short: 'x', why: 'git difftool --extcmd (-x) runs a command of its own' },
  grep: { long: ['open-files-in-pager'], short: 'O', why: 'git grep -O (--open-files-in-pager) runs the pager it names' },
  help: { long: ['web'], short: 'w', why: 'git help --web (-w) starts a browser' },
  bisect: { restAfter: ['run'], why: 'git bisect run runs the command that follows' },
  config: { all: 'git config writes configuration that runs commands later (alias.*, core.pager, core.fsmonitor, core.hooksPath)' },
  submodule: { all: 'git submodule foreach runs a shell command, and update can run one from the configuration' },
  'filter-branch': { all: 'git filter-branch runs its filters as shell commands' },
  'for-each-repo': { all: 'git for-each-repo runs the git command that follows in other repositories' },
  'merge-index': { all: 'git merge-index runs the merge program it is given' },
  'merge-one-file': { all: 'git merge-one-file is a merge program run by another command' },
  hook: { all: 'git hook run runs a hook' },
  shell: { all: 'git shell -c runs a command' },
  instaweb: { all: 'git instaweb starts a web server and a browser of its choosing' },
  'send-email': { all: 'git send-email runs --sendmail-cmd, --to-cmd, --cc-cmd and --smtp-server programs' },
  credential: { all: 'git credential runs credential helpers' },
};

const git: Rule = (words, launching) => {
  let i = 1;
  for (; i < words.length && words[i]!.startsWith('-'); i++) {
    if (!GIT_SAFE_GLOBAL.has(words[i]!)) {
      markFrom(words, launching, i, 'git -c, --config-env, --exec-path, -C, --git-dir and the other options before the command change what git runs');
      return;
    }
  }
  if (i >= words.length) return;
  const command = words[i]!;
  if (!GIT_COMMANDS.has(command)) mark(launching, i, `\`${command}\` is not one of git's own commands: an alias (alias.${command}=!cmd runs a shell command) or another program`);
  const rule = GIT_SUBCOMMANDS[command];
  if (rule && 'all' in rule) {
    markFrom(words, launching, i + 1, rule.all);
    return;
  }
  if (rule) options(rule, rule.why, i + 1)(words, launching);
  options({ long: ['output', 'output-directory'], word: gitTransport }, GIT_OUTPUT, i + 1)(words, launching);
};

/** find's actions that run a command (and those that write a file the command names). */
const find = options({ restAfter: ['-exec', '-execdir', '-ok', '-okdir', '-fprint', '-fprint0', '-fprintf', '-fls'] }, 'find -exec, -execdir, -ok and -okdir run a command; -fprint, -fprint0, -fprintf and -fls write a file it names');

const SSH_WHY = 'ssh -o (ProxyCommand, LocalCommand, KnownHostsCommand...), -F (a configuration file), -J and -I (a PKCS#11 library) run or load programs';

const WRAPPERS = ['env', 'nice', 'nohup', 'timeout', 'time', 'sudo', 'su', 'doas', 'pkexec', 'runuser', 'sg', 'newgrp', 'exec', 'command', 'builtin', 'eval', '.', 'source',
  'trap', 'watch', 'strace', 'ltrace', 'flock', 'setsid', 'stdbuf', 'chroot', 'unshare', 'nsenter', 'ionice', 'chrt', 'taskset', 'numactl', 'prlimit', 'setpriv',
  'setarch', 'linux32', 'linux64', 'capsh', 'chpst', 'fakeroot', 'faketime', 'firejail', 'bwrap', 'proot', 'systemd-run', 'run-parts', 'start-stop-daemon', 'daemonize',
  'entr', 'unbuffer', 'sshpass', 'torsocks', 'proxychains', 'proxychains4', 'script', 'expect', 'tclsh', 'wish', 'at', 'batch', 'tmux', 'screen', 'valgrind', 'perf',
  'catchsegv', 'xvfb-run', 'dbus-run-session', 'dbus-launch', 'ssh-agent', 'xargs', 'parallel', 'busybox', 'toybox', 'socat', 'nc', 'ncat', 'netcat', 'gdb', 'lldb',
  'dc', 'ed', 'ex', 'vi', 'vim', 'nvim', 'view', 'rvim', 'emacs', 'nano', 'less', 'more', 'most', 'pg', 'man', 'sqlite3', 'psql', 'mysql', 'mariadb', 'gnuplot',
  'deno', 'bun', 'npx', 'pnpx', 'bunx', 'Rscript', 'R', 'julia'];

const TABLE: Record<string, Rule> = {
  ...Object.fromEntries(WRAPPERS.map((name) => [name, everything(WRAPPER_WHY)])),
  ...Object.fromEntries(['sh', 'bash', 'dash', 'zsh', 'ksh', 'mksh', 'ash', 'fish'].map((name) => [name, interpreter(SHELL, SHELL_WHY)])),
  ...Object.fromEntries(['awk', 'gawk', 'mawk', 'nawk'].map((name) => [name, interpreter(AWK, 'awk runs its program (system(), print | "cmd")')])),
  python: interpreter(PYTHON, INTERPRETER_WHY),
  node: interpreter(NODE, INTERPRETER_WHY),
  nodejs: interpreter(NODE, INTERPRETER_WHY),
  perl: interpreter(PERL, INTERPRETER_WHY),
  ruby: interpreter(RUBY, INTERPRETER_WHY),
  php: interpreter(PHP, INTERPRETER_WHY),
  lua: interpreter(LUA, INTERPRETER_WHY),
  luajit: interpreter(LUA, INTERPRETER_WHY),
  sed,
  git,
  find,
  ssh: options({ short: 'oFJI' }, SSH_WHY),
  scp: options({ short: 'SDoFJ' }, 'scp -S and -D name the program it runs; -o, -F and -J as for ssh'),
  sftp: options({ short: 'SDoFJb' }, 'sftp -S and -D name the program it runs, -b a batch whose !lines run commands; -o, -F and -J as for ssh'),
  rsync: options({ long: ['rsh', 'rsync-path'], short: 'e' }, 'rsync -e (--rsh) and --rsync-path name the programs it runs'),
  tar: (words, launching) => {
    const why = 'tar -I (--use-compress-program), -F (--info-script, --new-volume-script), --to-command, --checkpoint-action=exec, --rsh-command and --rmt-command run programs; an archive named host:file is reached through a remote shell';
    const spec: OptionSpec = { long: ['use-compress-program', 'info-script', 'new-volume-script', 'to-command', 'checkpoint-action', 'rsh-command', 'rmt-command'], short: 'IF', word: (word) => (word.includes(':') ? why : undefined) };
    options(spec, why)(words, launching);
    // The first argument without a dash is a bundle of options (tar xIf prog a.tar).
    if (words[1] && !words[1].startsWith('-') && /[IF]/.test(words[1])) markFrom(words, launching, 1, why);
  },
  zip: options({ long: ['unzip-command'], prefixes: ['-TT'] }, 'zip -TT (--unzip-command) names the program that tests the archive'),
  sort: options({ long: ['compress-program'] }, 'sort --compress-program names a program it runs'),
  split: options({ long: ['filter'] }, 'split --filter runs a shell command'),
  wget: options({ long: ['use-askpass', 'execute', 'config'], short: 'e' }, 'wget --use-askpass runs a program, -e (--execute) and --config read settings that can name one'),
  'apt-get': options({ long: ['option', 'config-file'], short: 'oc' }, 'apt -o and -c set options such as APT::Update::Pre-Invoke that run commands'),
  apt: options({ long: ['option', 'config-file'], short: 'oc' }, 'apt -o and -c set options such as APT::Update::Pre-Invoke that run commands'),
  make: (words, launching) => {
    const why = 'make runs its recipes: -f, -C, -E (--eval), -I and VAR=value change which, and every option counts';
    for (let i = 1; i < words.length; i++) if (words[i]!.startsWith('-') || words[i]!.includes('=')) mark(launching, i, why);
  },
  ...Object.fromEntries(['npm', 'pnpm', 'yarn'].map((name) => [name, (words: readonly string[], launching: Launching) => {
    const why = `${name} exec, x, dlx, explore, create, init, install, add and config run or fetch programs of the arguments' choosing (or configure the shell scripts run with), and every option counts`;
    let command: string | undefined;
    for (let i = 1; i < words.length; i++) {
      const word = words[i]!;
      // Every option is a setting (--script-shell, --node-options, --userconfig), wherever it stands.
      if (word.startsWith('-')) mark(launching, i, why);
      else if (command === undefined) {
        command = word;
        if (['exec', 'x', 'dlx', 'explore', 'create', 'init', 'innit', 'install', 'i', 'isntall', 'add', 'config', 'c', 'set', 'edit'].includes(word)) {
          markFrom(words, launching, i, why);
          return;
        }
      }
    }
  }] as const)),
  ...Object.fromEntries(['pip', 'pip3'].map((name) => [name, (words: readonly string[], launching: Launching) => {
    const at = words.findIndex((word, i) => i > 0 && ['install', 'download', 'wheel'].includes(word));
    if (at > 0) markFrom(words, launching, at, `${name} install, download and wheel build packages, running their setup code`);
  }] as const)),
  ...Object.fromEntries(['cc', 'gcc', 'g++', 'c++', 'clang', 'clang++'].map((name) => [name, options({
    prefixes: ['-wrapper', '-B', '-fplugin', '-fpass-plugin', '-specs', '--specs', '-fuse-ld', '--ld-path', '-Wl,', '-Xlinker', '-Xclang', '-load'],
    word: (word) => (word.startsWith('@') ? 'a compiler reads more options from an @file' : undefined),
  }, 'a compiler\'s -wrapper, -B, -fplugin, -specs, -fuse-ld, -Wl, and -Xlinker choose programs and plugins it runs')])),
};

/** The programs the table names (for the docs' test). */
export const LAUNCHER_PROGRAMS: readonly string[] = [...Object.keys(TABLE), 'python3', 'pypy3'];

/** The table's rule for a program word: by its file name, a versioned interpreter (python3.12) as its family. */
function ruleOf(program: string): Rule | undefined {
  const name = program.slice(program.lastIndexOf('/') + 1);
  if (Object.hasOwn(TABLE, name)) return TABLE[name];
  if (/^(python|pypy)[0-9.]*$/.test(name)) return TABLE.python;
  const family = /^(perl|ruby|php|lua|node)[0-9.]*$/.exec(name)?.[1];
  return family ? TABLE[family] : undefined;
}

/** Which words of a command (program first) run another command, each with why. */
export function launchingWords(words: readonly string[]): Launching {
  const launching: Launching = new Map();
  ruleOf(words[0] ?? '')?.(words, launching);
  return launching;
}
