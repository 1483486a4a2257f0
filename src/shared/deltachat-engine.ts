/**
 * Where Delta Chat's engine (deltachat-rpc-server) is: the binary the
 * daemon runs for each Delta Chat account, and the one `gateway doctor`
 * looks for.
 */
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';

/** The environment variable naming an engine of one's own (as @deltachat/stdio-rpc-server reads it). */
export const ENGINE_ENV = 'DELTA_CHAT_RPC_SERVER';

/** The prebuilt engine's package for this platform (an optional dependency, installed where it exists). */
export const enginePackage = (): string => `@deltachat/stdio-rpc-server-${process.platform}-${process.arch}`;

/**
 * The engine's binary: DELTA_CHAT_RPC_SERVER when set (a file), else the
 * prebuilt package of this platform. Throws with what to do when there is none.
 */
export function enginePath(env: NodeJS.ProcessEnv = process.env): string {
  const given = env[ENGINE_ENV];
  if (given) {
    if (!statSync(given, { throwIfNoEntry: false })?.isFile()) throw new Error(`${ENGINE_ENV} is ${given}, which is not a file: point it at a deltachat-rpc-server binary, or unset it`);
    return given;
  }
  try {
    return createRequire(import.meta.url).resolve(enginePackage());
  } catch {
    throw new Error(`Delta Chat's engine is not installed for ${process.platform}-${process.arch} (${enginePackage()}): run npm install in the gateway's folder, or set ${ENGINE_ENV} to a deltachat-rpc-server binary`);
  }
}
