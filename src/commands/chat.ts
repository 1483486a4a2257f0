import { randomUUID } from 'node:crypto';
import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import { usageError } from '../shared/errors.ts';
import type { RunResult } from '../shared/protocol/results.ts';

export default class Chat extends BaseCommand<RunResult> {
  static override summary = 'Say something to an agent and print its answer.';
  static override description = 'On a terminal the answer streams in as it is written, with the tools the agent calls; otherwise the final text is printed once. '
    + 'The conversation goes on in the session (default: the agent\'s "cli" session); the message may also come on stdin. Ctrl-C aborts the run.';
  static override examples = [
    '<%= config.bin %> chat "What failed overnight?"',
    '<%= config.bin %> chat --agent ops --session incident-42 "Summarise the last deploy"',
    'echo "hello" | <%= config.bin %> chat --json',
  ];
  static override args = { message: Args.string({ description: 'what to say (else read from stdin)' }) };
  static override strict = false;
  static override flags = {
    url: BaseCommand.urlFlag,
    agent: Flags.string({ char: 'a', description: 'agent to talk to (default: the default agent)' }),
    session: Flags.string({ char: 's', description: 'session to continue: a session key, or a name for a chat session of the agent' }),
    timeout: Flags.integer({ description: 'seconds to wait for the answer', default: 600, min: 1 }),
  };

  async run(): Promise<RunResult> {
    const { argv, flags } = await this.parse(Chat);
    let message = (argv as string[]).join(' ').trim();
    if (!message && !process.stdin.isTTY) {
      let input = '';
      for await (const chunk of process.stdin) input += chunk;
      message = input.trim();
    }
    if (!message) throw usageError('Say something: gateway chat "<message>" (or pipe it on stdin).');
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const runId = `cli_${randomUUID().replace(/-/g, '')}`;
    const live = process.stdout.isTTY === true && !this.jsonEnabled();
    let streamed = false;
    if (live) {
      client.on('agent.delta', (payload) => {
        const event = payload as { runId: string; text: string };
        if (event.runId !== runId) return;
        streamed = true;
        process.stdout.write(event.text);
      });
      client.on('agent.tool', (payload) => {
        const event = payload as { runId: string; phase: string; name: string; args: unknown; error?: string };
        if (event.runId !== runId) return;
        if (event.phase === 'call') this.note(`\n[calls ${event.name} ${JSON.stringify(event.args)}]`);
        else if (event.error) this.note(`[${event.name} failed: ${event.error}]`);
      });
    }
    const stop = () => {
      void client.call('agent.abort', { runId }).finally(() => process.exit(130));
    };
    process.once('SIGINT', stop);
    try {
      const result = await client.call('agent.run', { message, runId, ...(flags.agent ? { agent: flags.agent } : {}), ...(flags.session ? { sessionKey: flags.session } : {}) }, flags.timeout * 1000);
      if (live) process.stdout.write(streamed ? '\n' : `${result.text}\n`);
      else this.say(result.text);
      return result;
    } finally {
      process.removeListener('SIGINT', stop);
    }
  }
}
