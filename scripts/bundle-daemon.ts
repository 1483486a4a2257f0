// Bundles, during `npm run build` after tsc, the two paths that run most
// often: the daemon (dist/server/main.js and its worker threads, into
// dist/daemon) and the plain `gateway status` and `gateway start` (into
// dist/fast), each with the libraries it uses, in a few files (one for the
// latter) instead of some 240 and 74 modules. Resolving and linking that many
// modules made Node's loader hot enough for V8 to compile it with its
// optimising tiers at every start: about 8 MB of the daemon's resident memory
// and a share of every start. What loads on first use (dynamic imports) stays
// a chunk of its own.
import { copyFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join } from 'node:path';
import { build, type BuildOptions, type Plugin } from 'esbuild';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
const out = join(dist, 'daemon');
const fast = join(dist, 'fast');
rmSync(out, { recursive: true, force: true });
rmSync(fast, { recursive: true, force: true });

// pino's transports run in worker threads through thread-stream; the daemon writes its log itself and never asks for
// one. Left in, thread-stream would load worker_threads and assert at start-up for nothing.
const noTransports: Plugin = {
  name: 'no-pino-transports',
  setup(builder) {
    builder.onResolve({ filter: /^thread-stream$/ }, () => ({ path: 'thread-stream', namespace: 'no-transports' }));
    builder.onLoad({ filter: /.*/, namespace: 'no-transports' }, () => ({
      contents: "module.exports = class ThreadStream { constructor() { throw new Error('pino transports are not available in the gateway daemon'); } };",
      loader: 'js',
    }));
  },
};

// The ws library loads Node's TLS (and with it OpenSSL's, about 7 MB and 12 ms) at its first line, for wss:// alone:
// here TLS and HTTPS load when a secure connection is made, and never for a ws:// one.
const lazyTls: Plugin = {
  name: 'lazy-tls',
  setup(builder) {
    builder.onResolve({ filter: /^(node:)?(tls|https)$/ }, (args) => (/[\\/]node_modules[\\/]ws[\\/]/.test(args.importer)
      ? { path: args.path.replace('node:', ''), namespace: 'lazy-tls' }
      : undefined));
    builder.onLoad({ filter: /.*/, namespace: 'lazy-tls' }, (args) => ({
      contents: `module.exports = new Proxy({}, { get: (_, key) => require('node:${args.path}')[key] });`,
      loader: 'js',
    }));
  },
};

// Node's own modules through require(): an ES import of one builds its ES facade, which reads every export and so
// loads what the module keeps lazy (an import from node:fs loads its streams, one from node:crypto all of WebCrypto).
const builtinsByRequire: Plugin = {
  name: 'builtins-by-require',
  setup(builder) {
    builder.onResolve({ filter: /^[a-z_:/]+$/ }, (args) => {
      if (!isBuiltin(args.path)) return undefined;
      // The require() inside the module below is Node's own.
      if (args.namespace === 'builtin') return { path: args.path, external: true };
      // A dynamic import() wants the module's named exports (const { Agent } = await import('http')): Node's own import, as written.
      if (args.kind === 'dynamic-import') return { path: args.path.startsWith('node:') ? args.path : `node:${args.path}`, external: true };
      return { path: args.path.startsWith('node:') ? args.path : `node:${args.path}`, namespace: 'builtin' };
    });
    builder.onLoad({ filter: /.*/, namespace: 'builtin' }, (args) => ({ contents: `module.exports = require(${JSON.stringify(args.path)});`, loader: 'js' }));
  },
};

const common: BuildOptions = {
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  chunkNames: 'chunk-[hash]',
  // Native, optional, or with files of their own beside them: found in node_modules at run time, as before. Playwright reads
  // its own files beside its code, and loads with the first browser only; the Matrix crypto library reads its WebAssembly.
  external: ['@napi-rs/keyring', 'pg-native', 'bufferutil', 'utf-8-validate', 'irc-framework', 'playwright-core', '@matrix-org/matrix-sdk-crypto-wasm'],
  // The CommonJS libraries inside call require() for Node's own modules.
  banner: { js: "import { createRequire as __gatewayRequire } from 'node:module'; const require = __gatewayRequire(import.meta.url);" },
  plugins: [noTransports, lazyTls, builtinsByRequire],
  // A third less source to read, parse and keep (about 3 MB of the daemon's memory), names kept; the source maps beside
  // the files lead a stack trace's positions back to dist/ (node --enable-source-maps, or any tool that reads them).
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: 'linked',
  legalComments: 'none',
  logLevel: 'warning',
};

await build({
  ...common,
  entryPoints: {
    main: join(dist, 'server/main.js'),
    // Started with new Worker(new URL('./<name>.js', import.meta.url)): beside every chunk, as beside their modules in dist/server.
    'checkpoint-worker': join(dist, 'server/store/checkpoint-worker.js'),
    'webhook-thread': join(dist, 'server/webhooks/webhook-thread.js'),
    // Started with fork(new URL('./browser-host.js', import.meta.url)): the browsers' own process.
    'browser-host': join(dist, 'server/toolbox/browser-host.js'),
  },
  outdir: out,
});
// esbuild gives each ES module that imports a CommonJS one (Node's own modules among them, see above) a namespace object
// of its own, with a getter defined for every export: node:crypto's hundred or so again for each of the 28 modules that
// import it, some 5,000 properties defined at every start. Once per module is enough: the getters read the module's
// exports as they are when read, so one namespace serves every importer (as Node's own ES import of it would).
const helper = 'var __toESM=(mod,isNodeMode,target)=>(';
const memoized = 'var __namespaces=new WeakMap,__toESM=(mod,isNodeMode,target)=>isNodeMode&&mod!=null&&(typeof mod=="object"||typeof mod=="function")'
  + '?__namespaces.get(mod)??(__namespaces.set(mod,target=__toESMOnce(mod,1)),target):__toESMOnce(mod,isNodeMode),__toESMOnce=(mod,isNodeMode,target)=>(';
const helpers = readdirSync(out).filter((name) => name.endsWith('.js')).filter((name) => readFileSync(join(out, name), 'utf8').includes(helper));
if (helpers.length !== 1) throw new Error(`bundle-daemon: esbuild's __toESM helper was expected in one chunk, found in ${helpers.length}: update the memoizing of it`);
const chunk = join(out, helpers[0]!);
writeFileSync(chunk, readFileSync(chunk, 'utf8').replace(helper, memoized));

// The plain `gateway status` and `gateway start` as one CommonJS file, which bin/run.js requires: resolving, linking
// and evaluating some 40 ES modules cost about 11 ms of every such command. Its few lazy parts come along (about
// 330 KB, compiled once into Node's compile cache); import.meta.url is the file's own address.
await build({
  ...common,
  format: 'cjs',
  splitting: false,
  entryPoints: { 'fast-status': join(dist, 'cli/fast-status.js') },
  outdir: fast,
  outExtension: { '.js': '.cjs' },
  define: { 'import.meta.url': '__gatewayModuleUrl' },
  banner: { js: "const __gatewayModuleUrl = require('node:url').pathToFileURL(__filename).href;" },
  plugins: [noTransports, lazyTls],
});

// Loaded with createRequire from beside the code that uses them (src/shared/config/keys.ts, src/shared/protocol/validator-names.ts).
for (const dir of [out, fast]) {
  copyFileSync(join(dist, 'shared/config/config-validator.generated.cjs'), join(dir, 'config-validator.generated.cjs'));
  copyFileSync(join(dist, 'shared/protocol/validators.generated.cjs'), join(dir, 'validators.generated.cjs'));
}
