import { expect } from 'chai';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';
import { hooksDocument } from '../../../../src/server/hooks/document.ts';
import { mappingProblems } from '../../../../src/server/hooks/mapping-check.ts';

describe('hooks: mappings and the ingress\'s description', () => {
  it('refuses a mapping that queues jobs no handler runs, naming it by its key', () => {
    const config = effectiveConfig({
      hooks: {
        mappings: [
          { name: 'deploy', action: 'job' },
          { name: 'build', action: 'job', kind: 'ci.build' },
          { name: 'ping', action: 'wake', sessionKey: 'irc:main:dm:ann', text: 'ping' },
          { name: 'ok', action: 'job', kind: 'known' },
        ],
      },
    });
    expect(mappingProblems(config, (kind) => kind === 'known')).to.deep.equal([
      'hooks.mappings.0 (deploy): no handler runs jobs of kind hooks.deploy',
      'hooks.mappings.1 (build): no handler runs jobs of kind ci.build',
    ]);
    expect(mappingProblems(config, () => true)).to.deep.equal([]);
  });

  it('describes the ingress under the base path the daemon started with', () => {
    const document = hooksDocument('/in/hooks');
    expect(Object.keys(document.paths)).to.deep.equal(['/in/hooks/{name}']);
    expect(document.schemas).to.have.property('HookResult');
  });
});
