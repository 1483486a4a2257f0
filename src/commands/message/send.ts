import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { usageError } from '../../shared/errors.ts';

export default class MessageSend extends BaseCommand<Record<string, unknown>> {
  static override summary = 'Send a message to a peer or room through a channel; it is recorded in the session.';
  static override description = 'Pass the text as an argument, or "-" to read it from stdin; with --file, a file of an agent\'s workspace goes with it (the text is its caption, and may be left out). The message goes through the channel\'s outbox: it waits for its first attempt (up to 10 s) and says whether the platform took it; one that could not go yet is kept and sent as soon as the channel takes it (exit 0; --json says sent: false and why).';
  static override examples = [
    '<%= config.bin %> message send --channel irc --to alice "Back in five minutes"',
    'uptime | <%= config.bin %> message send --channel irc --to "#ops" -',
    '<%= config.bin %> message send --channel telegram --to 123456 --file reports/week.pdf "This week\'s report"',
  ];
  static override args = { text: Args.string({ description: 'the message, or - for stdin (with --file, its caption)' }) };
  static override flags = {
    url: BaseCommand.urlFlag,
    channel: Flags.string({ description: 'channel to send through, such as irc', required: true }),
    to: Flags.string({ description: 'peer (for IRC a nick) or room (#room)', required: true }),
    account: Flags.string({ description: 'channel account (when the channel has several)' }),
    file: Flags.string({ description: 'a file of the agent\'s workspace to send (its path there); never one outside it' }),
    agent: Flags.string({ description: 'whose workspace --file is read from (default: the channel\'s agent)', dependsOn: ['file'] }),
  };

  async run(): Promise<Record<string, unknown>> {
    const { args, flags } = await this.parse(MessageSend);
    let text = args.text ?? '';
    if (args.text === undefined && !flags.file) throw usageError('Give the message (or - for stdin), or a --file to send.');
    if (text === '-') {
      if (process.stdin.isTTY) throw usageError('"-" reads the message from stdin, but stdin is a terminal; pipe the text in or pass it as an argument.');
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      text = Buffer.concat(chunks).toString('utf8').replace(/\n+$/, '');
    }
    if (text.trim().length === 0 && !flags.file) throw usageError('The message is empty.');
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('message.send', {
      channel: flags.channel, to: flags.to, text, ...(flags.account ? { account: flags.account } : {}),
      ...(flags.file ? { file: flags.file } : {}), ...(flags.agent ? { agent: flags.agent } : {}),
    });
    if (result.sent) this.say(`Sent to ${flags.to} on ${flags.channel} (session ${result.sessionKey}).`);
    else {
      const retry = result.delivery.nextAttemptAt ? `; tried again from ${result.delivery.nextAttemptAt}` : '';
      this.say(`Queued for ${flags.to} on ${flags.channel}: not delivered yet (${result.delivery.error ?? 'waiting its turn'})${retry}, and sent as soon as the channel takes it (session ${result.sessionKey}; gateway channels status).`);
    }
    return result;
  }
}
