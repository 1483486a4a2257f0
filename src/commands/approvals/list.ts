import { BaseCommand } from '../../cli/base-command.ts';
import { table } from '../../cli/table.ts';
import type { ExecApprovalView } from '../../shared/protocol/results.ts';

export default class ApprovalsList extends BaseCommand<{ approvals: ExecApprovalView[] }> {
  static override summary = 'List commands waiting for an operator before exec runs them.';
  static override examples = ['<%= config.bin %> approvals list', '<%= config.bin %> approvals list --json'];
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<{ approvals: ExecApprovalView[] }> {
    const { flags } = await this.parse(ApprovalsList);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('approvals.list');
    this.say(result.approvals.length ? table(['ID', 'CALLER', 'COMMAND', 'EXPIRES'], result.approvals.map((approval) => [
      approval.id, approval.caller, approval.command.length > 80 ? `${approval.command.slice(0, 79)}…` : approval.command, approval.expiresAt,
    ])) : 'No command waits for approval.');
    return result;
  }
}
