import { Args } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';

export default class Autocomplete extends BaseCommand<{ shell: string; script: string }> {
  static override summary = 'Print the shell completion script for bash or zsh.';
  static override description = 'Completes commands and flags, flag and argument choices, and from the profile: profile names, channel names, pending pairing codes, '
    + 'token and job ids, secret names and configuration keys. Install it by adding the eval line to your shell\'s start-up file.';
  static override examples = [
    'echo \'eval "$(gateway autocomplete bash)"\' >> ~/.bashrc',
    'echo \'eval "$(gateway autocomplete zsh)"\' >> ~/.zshrc',
  ];
  static override enableJsonFlag = false;
  static override args = { shell: Args.string({ description: 'the shell', options: ['bash', 'zsh'], default: 'bash' }) };

  async run(): Promise<{ shell: string; script: string }> {
    const { args } = await this.parse(Autocomplete);
    const { completionScript } = await import('../cli/complete.ts');
    const script = completionScript(args.shell as 'bash' | 'zsh');
    process.stdout.write(script);
    return { shell: args.shell, script };
  }
}
