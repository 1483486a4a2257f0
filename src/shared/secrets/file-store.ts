import { chmodSync, readFileSync, rmSync, statSync } from 'node:fs';
import { writeFileAtomic } from '../atomic-file.ts';
import { GatewayError } from '../errors.ts';
import type { SecretStore } from './backend.ts';

interface SecretsFile {
  version: 1;
  secrets: Record<string, string>;
}

/** Where a loosened secret file is reported: stderr for commands; the daemon sends it to its log. */
let reportLoose = (message: string): void => {
  process.stderr.write(`Warning: ${message}\n`);
};
export const onLooseSecretFile = (report: (message: string) => void): void => {
  reportLoose = report;
};

/** Secrets in a 0600 JSON file in the profile folder: for hosts without a reachable keychain. */
export class FileSecretStore implements SecretStore {
  readonly backend = 'file' as const;
  readonly path: string;

  constructor(path: string) {
    this.path = path;
  }

  get location(): string {
    return this.path;
  }

  private read(): SecretsFile {
    let text: string;
    try {
      this.tighten();
      text = readFileSync(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, secrets: {} };
      throw new GatewayError(`Cannot read the secret file ${this.path}: ${(error as NodeJS.ErrnoException).code ?? 'error'}.`);
    }
    try {
      const parsed = JSON.parse(text) as SecretsFile;
      if (parsed?.version === 1 && parsed.secrets && typeof parsed.secrets === 'object') return parsed;
    } catch {
      // reported below without echoing the content
    }
    throw new GatewayError(`The secret file ${this.path} is damaged; it was left as it is.`, {
      hints: [`move ${this.path} aside and set the secrets again with gateway secrets set <name>`],
    });
  }

  /** A file others may read (a copy, an unpack, a chmod) is made 0600 again before it is read, and that is said. */
  private tighten(): void {
    const mode = statSync(this.path).mode & 0o777;
    if ((mode & 0o077) === 0) return;
    chmodSync(this.path, 0o600);
    reportLoose(`${this.path} was readable by others (mode ${mode.toString(8).padStart(4, '0')}); it is 0600 again. Its secrets may have been read: consider rotating them (gateway secrets set <name>).`);
  }

  private write(file: SecretsFile): void {
    writeFileAtomic(this.path, `${JSON.stringify(file, null, 2)}\n`);
  }

  async get(name: string): Promise<string | undefined> {
    return this.read().secrets[name];
  }

  async set(name: string, value: string): Promise<void> {
    const file = this.read();
    file.secrets[name] = value;
    this.write(file);
  }

  async delete(name: string): Promise<boolean> {
    const file = this.read();
    if (!Object.hasOwn(file.secrets, name)) return false;
    delete file.secrets[name];
    this.write(file);
    return true;
  }

  async list(): Promise<string[]> {
    return Object.keys(this.read().secrets).sort();
  }

  async clear(): Promise<void> {
    rmSync(this.path, { force: true });
  }
}
