import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { usageError } from '../../shared/errors.ts';

export interface InvokeResult {
  node: string;
  command: string;
  result: unknown;
}

export default class NodesInvoke extends BaseCommand<InvokeResult> {
  static override summary = 'Relay a command to a connected node and print its result.';
  static override examples = ['<%= config.bin %> nodes invoke kitchen-pi camera.snap --args \'{"width":640}\' --timeout 10s'];
  static override args = {
    node: Args.string({ description: 'node client id or device id (or an unambiguous prefix of it)', required: true }),
    command: Args.string({ description: 'command the node offers', required: true }),
  };
  static override flags = {
    args: Flags.string({ description: 'arguments as JSON' }),
    timeout: Flags.string({ description: 'how long to wait for the node (90s, 2m)', default: '30s' }),
    url: BaseCommand.urlFlag,
  };

  async run(): Promise<InvokeResult> {
    const { args, flags } = await this.parse(NodesInvoke);
    const { parseDuration } = await import('../../cli/duration.ts');
    const timeoutMs = parseDuration(flags.timeout, '--timeout');
    let input: unknown = null;
    if (flags.args !== undefined) {
      try {
        input = JSON.parse(flags.args);
      } catch {
        throw usageError('--args must be JSON, for example --args \'{"key":"value"}\'.');
      }
    }
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('nodes.invoke', { node: args.node, command: args.command, args: input, timeoutMs }, timeoutMs + 5000);
    this.say(typeof result.result === 'string' ? result.result : JSON.stringify(result.result, null, 2));
    return result;
  }
}
