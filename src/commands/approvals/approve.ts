import { Args } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import type { ExecApprovalView } from '../../shared/protocol/results.ts';
import { visibleText } from '../../shared/visible-text.ts';

export default class ApprovalsApprove extends BaseCommand<ExecApprovalView> {
  static override summary = 'Approve a waiting command: exec runs it, in its sandbox.';
  static override examples = ['<%= config.bin %> approvals approve ap_7f3a1c9e20b4', '<%= config.bin %> approvals approve 7f3a'];
  static override args = { id: Args.string({ description: 'the approval id, or its short code (gateway approvals list)', required: true }) };
  static override flags = { url: BaseCommand.urlFlag };

  async run(): Promise<ExecApprovalView> {
    const { args, flags } = await this.parse(ApprovalsApprove);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const decided = await client.call('approvals.decide', { id: args.id, approve: true });
    this.say(`Approved ${decided.id}: ${visibleText(decided.command)}`);
    return decided;
  }
}
