import { expect } from 'chai';
import { plainStatusFlags } from '../../../src/cli/fast-status.ts';

describe('gateway status without oclif', () => {
  it('takes only the plain forms; anything else goes to the oclif command', () => {
    expect(plainStatusFlags([], {})).to.deep.equal({ json: false });
    expect(plainStatusFlags(['--json'], {})).to.deep.equal({ json: true });
    expect(plainStatusFlags(['-p', 'staging', '--json'], {})).to.deep.equal({ json: true, profile: 'staging' });
    expect(plainStatusFlags(['--profile=staging'], {})).to.deep.equal({ json: false, profile: 'staging' });
    // Flags it does not own, a missing value, repeats, help, a remote gateway: oclif answers (and owns the usage errors).
    for (const argv of [['--url', 'ws://h:1'], ['--profile'], ['--profile', '--json'], ['--json', '--json'], ['--help'], ['-h'], ['extra'], ['--profile='], ['-p', 'a', '-p', 'b']]) {
      expect(plainStatusFlags(argv, {}), argv.join(' ')).to.equal(undefined);
    }
    expect(plainStatusFlags(['--json'], { GATEWAY_URL: 'ws://h:1' })).to.equal(undefined);
    expect(plainStatusFlags([], { GATEWAY_CONTENT_TYPE: 'json' })).to.equal(undefined);
  });
});
