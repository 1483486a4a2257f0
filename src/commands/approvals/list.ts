import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import type { ExecApprovalView } from '../../shared/protocol/results.ts';
import { visibleText } from '../../shared/visible-text.ts';

export default class ApprovalsList extends BaseCommand<{ approvals: ExecApprovalView[] }> {
  static override summary = 'List commands waiting for an operator before exec runs them (on every daemon of a shared store).';
  static override examples = ['<%= config.bin %> approvals list', '<%= config.bin %> approvals list --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<{ approvals: ExecApprovalView[] }> {
    const { flags } = await this.parse(ApprovalsList);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('approvals.list');
    // The command whole and last, its line breaks, escapes and invisible characters shown as escapes: what is approved is what is read.
    this.say(result.approvals.length ? table(['ID', 'CODE', 'CALLER', 'EXPIRES', 'COMMAND'], result.approvals.map((approval) => [
      approval.id, approval.code, visibleText(approval.caller), approval.expiresAt, visibleText(approval.command),
    ])) : 'No command waits for approval.');
    // A chat that was not told (outside WhatsApp's window, a channel down), and why.
    for (const approval of result.approvals) {
      for (const notice of approval.told ?? []) {
        if (notice.status === 'sent') continue;
        const what = notice.status === 'failed' ? 'was not told' : 'is not told yet';
        this.say(`${approval.code}: ${notice.channel} ${visibleText(notice.to)} ${what}${notice.error ? `: ${visibleText(notice.error)}` : ''}`);
      }
    }
    return result;
  }
}
