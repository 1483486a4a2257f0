import { BaseCommand } from '../../cli/base-command.ts';
import type { StoreStatus } from '../../shared/protocol/results.ts';

const size = (bytes: number | null) => (bytes === null ? 'unknown' : bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MB` : `${Math.ceil(bytes / 1024)} KB`);

export default class StoreStatusCommand extends BaseCommand<StoreStatus> {
  static override summary = 'Show where the profile keeps its state: the backend, schema, size, the daemons attached and who holds each singleton.';
  static override examples = ['<%= config.bin %> store status', '<%= config.bin %> store status --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<StoreStatus> {
    const { flags } = await this.parse(StoreStatusCommand);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const status = await client.call('store.status', {});
    const modules = Object.entries(status.modules).map(([name, version]) => `${name} ${version}`).join(', ');
    this.say(`backend:    ${status.backend} (${status.location})`);
    this.say(`schema:     ${status.schemaVersion}${modules ? ` (modules: ${modules})` : ''}`);
    this.say(`size:       ${size(status.sizeBytes)}`);
    this.say(`daemons:    ${status.daemons.length} attached`);
    for (const daemon of status.daemons) {
      this.say(`  ${daemon.instanceId}  ${daemon.profile}${daemon.address ? `  ${daemon.address}` : ''}${daemon.connectedAt ? `  since ${daemon.connectedAt}` : ''}${daemon.instanceId === status.self ? '  (this one)' : ''}`);
    }
    if (status.singletons.length > 0) {
      this.say('singletons:');
      for (const singleton of status.singletons) {
        this.say(`  ${singleton.name.padEnd(20)} ${singleton.holder === null ? 'held by no daemon right now' : `held by ${singleton.holder}${singleton.holder === status.self ? ' (this one)' : ''}`}`);
      }
    }
    return status;
  }
}
