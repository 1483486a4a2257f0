import { Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import { table } from '../cli/table.ts';
import type { MethodResults } from '../shared/protocol/results.ts';
import { visibleJson, visibleText } from '../shared/visible-text.ts';

export type AuditResult = MethodResults['audit.list'];

export default class Audit extends BaseCommand<AuditResult> {
  static override summary = 'Show the audit log: authentication failures, pairing decisions, revocations, secret changes.';
  static override examples = ['<%= config.bin %> audit --since 1h', '<%= config.bin %> audit --since 2026-11-01T00:00:00Z --json'];
  static override flags = {
    url: BaseCommand.urlFlag,
    since: Flags.string({ description: 'an ISO time or a duration ago (1h, 7d)' }),
    limit: Flags.integer({ description: 'at most this many events (newest)', default: 200, min: 1, max: 1000 }),
  };

  async run(): Promise<AuditResult> {
    const { flags } = await this.parse(Audit);
    const { parseSince } = await import('../cli/duration.ts');
    const since = flags.since ? parseSince(flags.since) : 0;
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    const result = await client.call('audit.list', { since, limit: flags.limit });
    this.say(result.events.length ? table(['TIME', 'EVENT', 'SUBJECT', 'FROM', 'DETAIL'], result.events.map((e) => [
      e.at, e.kind, visibleText(String(e.subject ?? '-')), visibleText(String(e.address ?? '-')), e.detail ? visibleJson(e.detail) : '',
    ])) : 'No audit events.');
    return result;
  }
}
