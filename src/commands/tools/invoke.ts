import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { usageError } from '../../shared/errors.ts';
import type { ToolAnswer } from '../../shared/protocol/results.ts';

export default class ToolsInvoke extends BaseCommand<ToolAnswer> {
  static override summary = 'Invoke a tool with JSON arguments and print its result.';
  static override examples = [
    '<%= config.bin %> tools invoke gateway.status',
    '<%= config.bin %> tools invoke jobs.get --args \'{"id":"job_0mhk2x3b"}\' --json',
    '<%= config.bin %> tools invoke message.send --args \'{"channel":"irc","to":"alice","text":"hi"}\' --idempotency-key send-42',
  ];
  static override args = { tool: Args.string({ description: 'tool name (see `tools list`)', required: true }) };
  static override flags = {
    url: BaseCommand.urlFlag,
    args: Flags.string({ description: 'arguments as a JSON object', default: '{}' }),
    'session-key': Flags.string({ description: 'session the call acts for' }),
    'idempotency-key': Flags.string({ description: 'a retry with the same key returns the first result instead of running again' }),
    'dry-run': Flags.boolean({ description: 'check the tool, the policy and the arguments without running it' }),
  };

  async run(): Promise<ToolAnswer> {
    const { args, flags } = await this.parse(ToolsInvoke);
    let parsed: unknown;
    try {
      parsed = JSON.parse(flags.args);
    } catch {
      throw usageError(`--args must be a JSON object (got ${JSON.stringify(flags.args)}).`);
    }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw usageError('--args must be a JSON object.');
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('tools.invoke', {
      tool: args.tool, args: parsed as Record<string, unknown>,
      ...(flags['session-key'] ? { sessionKey: flags['session-key'] } : {}),
      ...(flags['idempotency-key'] ? { idempotencyKey: flags['idempotency-key'] } : {}),
      ...(flags['dry-run'] ? { dryRun: true } : {}),
    }, 60_000);
    this.say(JSON.stringify(result.result, null, 2));
    return result;
  }
}
