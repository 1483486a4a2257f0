// Bundles the Control UI (src/ui) into dist/ui during `npm run build`: one
// script and one style sheet with hashed names under assets/, index.html
// naming them, and gzip and brotli copies of each made here, once, so the
// daemon serves them without compressing anything.
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { build } from 'esbuild';

const root = new URL('..', import.meta.url).pathname;
const source = join(root, 'src/ui');
const out = join(root, 'dist/ui');
const assets = join(out, 'assets');

rmSync(out, { recursive: true, force: true });
mkdirSync(assets, { recursive: true });

const result = await build({
  entryPoints: { app: join(source, 'main.ts'), style: join(source, 'style.css') },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['chrome111', 'firefox115', 'safari16.4'],
  tsconfig: join(source, 'tsconfig.json'),
  entryNames: '[name]-[hash]',
  chunkNames: 'chunk-[hash]',
  splitting: true,
  outdir: assets,
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
});

const written = Object.keys(result.metafile.outputs).map((file) => basename(file));
const script = written.find((name) => name.startsWith('app-') && name.endsWith('.js'));
const style = written.find((name) => name.startsWith('style-') && name.endsWith('.css'));
if (!script || !style) throw new Error(`build-ui: expected app-*.js and style-*.css, got ${written.join(', ')}`);

const page = readFileSync(join(source, 'index.html'), 'utf8')
  .replace('%SCRIPT%', `assets/${script}`)
  .replace('%STYLE%', `assets/${style}`);
writeFileSync(join(out, 'index.html'), page);
writeFileSync(join(assets, 'icon.svg'), readFileSync(join(source, 'icon.svg')));

const compress = (dir: string) => {
  for (const name of readdirSync(dir, { withFileTypes: true })) {
    const file = join(dir, name.name);
    if (name.isDirectory()) {
      compress(file);
      continue;
    }
    if (/\.(gz|br)$/.test(name.name)) continue;
    const raw = readFileSync(file);
    writeFileSync(`${file}.gz`, gzipSync(raw, { level: 9 }));
    writeFileSync(`${file}.br`, brotliCompressSync(raw, { params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: raw.length } }));
  }
};
compress(out);
