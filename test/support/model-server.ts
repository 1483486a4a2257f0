/**
 * The real test model (../shared/models/stories260K.gguf) behind an
 * OpenAI-compatible server in its own process (test/model-server/). A
 * missing model file or server package fails the test run: it never skips.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './cli.ts';

export const MODEL_FILE = join(ROOT, '../shared/models/stories260K.gguf');
const SERVER = join(ROOT, 'test/model-server/server.mjs');

export interface ModelServer {
  url: string;
  stop(): void;
}

export async function startModelServer(): Promise<ModelServer> {
  if (!existsSync(MODEL_FILE)) throw new Error(`the test model is missing: ${MODEL_FILE} (the project's shared folder must sit beside the checkout)`);
  if (!existsSync(join(ROOT, 'test/model-server/node_modules/node-llama-cpp'))) {
    throw new Error('the test model server is not installed: (cd test/model-server && npm install --omit=optional --no-save)');
  }
  const child: ChildProcess = spawn(process.execPath, [SERVER, MODEL_FILE, '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the test model server did not start: ${output}`)), 30_000);
    child.stdout!.on('data', (chunk) => {
      output += chunk;
      const match = /listening (\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.stderr!.on('data', (chunk) => { output += chunk; });
    child.once('exit', (code) => reject(new Error(`the test model server exited with ${code}: ${output}`)));
  });
  return { url: `http://127.0.0.1:${port}/v1`, stop: () => child.kill('SIGTERM') };
}
