import Profiles from './index.ts';

export default class ProfilesList extends Profiles {
  static override summary = 'List profiles, their ports and whether their daemons run.';
  static override examples = ['<%= config.bin %> profiles list --json'];
}
