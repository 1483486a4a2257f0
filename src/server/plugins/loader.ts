import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { RegisterFn, RegistrationApi } from '../kernel/module.ts';

export interface LoadedModule {
  name: string;
  /** The folder or package as configured, and the file it resolved to. */
  source: string;
  entry: string;
  register: RegisterFn;
}

export class PluginLoadError extends Error {}

const isPathSpec = (spec: string) => spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('~');

function readPackage(folder: string): Record<string, unknown> | undefined {
  const file = join(folder, 'package.json');
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch (error) {
    throw new PluginLoadError(`${file} is not valid JSON (${(error as Error).message})`);
  }
}

/** The module file of a package folder: exports["."] (import or default), module, main, then index.js/index.mjs. */
function entryOf(folder: string, pkg: Record<string, unknown> | undefined): string {
  const exported = pkg?.exports;
  const dot = typeof exported === 'string' ? exported
    : exported && typeof exported === 'object' ? (exported as Record<string, unknown>)['.'] ?? exported : undefined;
  const fromExports = typeof dot === 'string' ? dot
    : dot && typeof dot === 'object' ? ((dot as Record<string, unknown>).import ?? (dot as Record<string, unknown>).default) : undefined;
  const candidates = [fromExports, pkg?.module, pkg?.main, 'index.js', 'index.mjs'].filter((c): c is string => typeof c === 'string');
  for (const candidate of candidates) {
    const file = resolve(folder, candidate);
    if (existsSync(file) && statSync(file).isFile()) return file;
  }
  throw new PluginLoadError(`no module file in ${folder} (looked for ${candidates.join(', ')})`);
}

/** Where a plugin spec points: a folder (relative to the profile folder, or absolute, or ~), or a package installed for the profile or the gateway. */
export function resolvePlugin(spec: string, profileDir: string): { name: string; folder: string; entry: string } {
  if (isPathSpec(spec)) {
    const expanded = spec.startsWith('~') ? join(homedir(), spec.slice(1)) : spec;
    const target = isAbsolute(expanded) ? expanded : resolve(profileDir, expanded);
    if (!existsSync(target)) throw new PluginLoadError(`no plugin at ${target}`);
    if (statSync(target).isFile()) return { name: basename(target).replace(/\.[cm]?js$/, ''), folder: dirname(target), entry: target };
    const pkg = readPackage(target);
    return { name: typeof pkg?.name === 'string' ? pkg.name : basename(target), folder: target, entry: entryOf(target, pkg) };
  }
  if (!/^(@[a-z0-9._~-]+\/)?[a-z0-9._~-]+$/i.test(spec)) throw new PluginLoadError(`${JSON.stringify(spec)} is neither a folder nor a package name`);
  const places = [join(profileDir, 'node_modules', spec)];
  try {
    places.push(dirname(createRequire(import.meta.url).resolve(`${spec}/package.json`)));
  } catch {
    // not installed beside the gateway
  }
  const folder = places.find((place) => existsSync(join(place, 'package.json')));
  if (!folder) throw new PluginLoadError(`package ${spec} is not installed (install it in ${profileDir} with npm, or name a folder)`);
  return { name: spec, folder, entry: entryOf(folder, readPackage(folder)) };
}

/**
 * Imports a plugin module afresh: each load gets its own copy of the entry
 * module (a new URL), so a reload sees the file as it is now.
 */
export async function importPlugin(spec: string, profileDir: string, generation: number): Promise<LoadedModule> {
  const { name, entry } = resolvePlugin(spec, profileDir);
  let module: Record<string, unknown>;
  try {
    module = await import(`${pathToFileURL(entry).href}?generation=${generation}`) as Record<string, unknown>;
  } catch (error) {
    throw new PluginLoadError(`${entry} failed to import: ${(error as Error).message}`);
  }
  const fallback = module.default as Record<string, unknown> | ((api: RegistrationApi) => unknown) | undefined;
  const register = typeof module.register === 'function' ? module.register
    : fallback && typeof fallback === 'object' && typeof fallback.register === 'function' ? fallback.register
      : undefined;
  if (typeof register !== 'function') throw new PluginLoadError(`${entry} exports no register(api) function (named, or on the default export)`);
  return { name, source: spec, entry, register: register as RegisterFn };
}
