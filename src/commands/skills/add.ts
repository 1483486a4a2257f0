import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { usageError } from '../../shared/errors.ts';
import type { SkillView } from '../../shared/protocol/results.ts';

/** Raw bytes of files sent in one call: their base64 stays well under the WebSocket frame limit. */
const BATCH_BYTES = 600 * 1024;

export default class SkillsAdd extends BaseCommand<SkillView> {
  static override summary = 'Add a skill (Agent Skills format: a folder with SKILL.md) from a folder, an archive or a git repository.';
  static override description = 'The skill is read here, checked (its name, its size, no link leaving it; nothing in it is run) and kept by the daemon under the profile\'s skills/ folder. Agents use it where agents.<id>.skills names it (or "*").';
  static override examples = [
    '<%= config.bin %> skills add ./pdf-forms',
    '<%= config.bin %> skills add ./release-notes.tar.gz',
    '<%= config.bin %> skills add https://github.com/acme/skills-weather.git --replace',
  ];
  static override args = { source: Args.string({ description: 'a folder, a .tar.gz/.tgz/.tar/.zip archive, or a git address (https://, ssh://, git@host:path, file://)', required: true }) };
  static override flags = { replace: Flags.boolean({ description: 'replace an installed skill of the same name' }), url: BaseCommand.urlFlag };

  async run(): Promise<SkillView> {
    const { args, flags } = await this.parse(SkillsAdd);
    const [{ readSkillSource }, { checkSkill, SkillProblem }] = await Promise.all([import('../../cli/skill-source.ts'), import('../../shared/skills.ts')]);
    let read;
    try {
      read = await readSkillSource(args.source);
      checkSkill(read.files);
    } catch (error) {
      if (error instanceof SkillProblem) throw usageError(`The skill cannot be added: ${error.message}`);
      throw error;
    }
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    let upload: string | undefined;
    let batch: typeof read.files = [];
    let size = 0;
    const send = async () => {
      const sent = await client.call('skills.upload', {
        ...(upload ? { upload } : {}), files: batch.map((file) => ({ path: file.path, data: file.data.toString('base64'), executable: file.executable })),
      });
      upload = sent.upload;
      batch = [];
      size = 0;
    };
    for (const file of read.files) {
      if (size + file.data.length > BATCH_BYTES && batch.length > 0) await send();
      batch.push(file);
      size += file.data.length;
    }
    await send();
    const installed = await client.call('skills.install', { upload: upload!, source: read.from.slice(0, 2048), replace: flags.replace });
    this.say(`Added skill ${installed.name} (${installed.files} files, ${installed.bytes} bytes) from ${read.from}.`);
    this.say(`Agents use it where agents.<id>.skills names it: gateway config set agents.<id>.skills '["${installed.name}"]'`);
    return installed;
  }
}
