import { expect } from 'chai';
import { systemdUnit } from '../../../src/server/core/self-restart.ts';

describe('self-restart', () => {
  it('finds the systemd unit a daemon runs in from its cgroup, user or system', () => {
    expect(systemdUnit('0::/user.slice/user-1000.slice/user@1000.service/app.slice/gateway-default.service\n')).to.deep.equal({ unit: 'gateway-default.service', user: true });
    expect(systemdUnit('0::/system.slice/gateway-prod.service\n')).to.deep.equal({ unit: 'gateway-prod.service', user: false });
    // A terminal's session scope, a container's root: no unit to restart.
    expect(systemdUnit('0::/user.slice/user-1000.slice/session-3.scope\n')).to.equal(undefined);
    expect(systemdUnit('0::/\n')).to.equal(undefined);
    expect(systemdUnit('12:pids:/docker/abc\n')).to.equal(undefined);
  });
});
