import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';

export interface JoinResult {
  url: string;
  deviceId: string;
  role: string;
  scopes: string[];
  stored: string;
}

export default class DevicesJoin extends BaseCommand<JoinResult> {
  static override summary = 'Pair this machine with a remote gateway using a one-time join code from `gateway devices invite`.';
  static override description = 'The device token the gateway issues is kept in this profile\'s secret store and used by later commands with the same --url.';
  static override examples = ['<%= config.bin %> devices join 7CPA-PR32-4579 --url ws://gateway-host:18789'];
  static override args = { code: Args.string({ description: 'join code', required: true }) };
  static override flags = {
    url: Flags.string({ description: 'the gateway to join, such as ws://host:18789', env: 'GATEWAY_URL', required: true }),
  };

  async run(): Promise<JoinResult> {
    const { args, flags } = await this.parse(DevicesJoin);
    const profile = this.selectProfile(flags.profile);
    const [{ connectRemote, normalizeUrl, remoteTokenSecret }, { ensureProfile }, { openSecretStore }] = await Promise.all([
      import('../../cli/remote.ts'), import('../../shared/profile-setup.ts'), import('../../shared/secrets/secret-store.ts'),
    ]);
    const url = normalizeUrl(flags.url);
    const setup = await ensureProfile(profile.paths);
    if (setup.warning) this.warning(setup.warning);
    const store = openSecretStore(profile.paths, setup.backend);
    const client = await connectRemote(url, store, { auth: { inviteCode: args.code } });
    client.close();
    const hello = client.hello!;
    this.say(`Joined ${url} as device ${hello.device.id} (${hello.role}: ${hello.scopes.join(', ')}). Use --url ${url} with later commands.`);
    return { url, deviceId: hello.device.id, role: hello.role, scopes: hello.scopes, stored: remoteTokenSecret(url) };
  }
}
