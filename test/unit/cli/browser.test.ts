import { expect } from 'chai';
import { userInfo } from 'node:os';
import { sshForward } from '../../../src/cli/browser.ts';

describe('the ssh -L line printed over SSH', () => {
  const saved = { USER: process.env.USER, LOGNAME: process.env.LOGNAME, SSH_CONNECTION: process.env.SSH_CONNECTION };
  afterEach(() => {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  });

  it('names the login: USER, else LOGNAME, else the account itself when both are unset or empty', () => {
    process.env.SSH_CONNECTION = '198.51.100.7 52000 192.0.2.1 22';
    process.env.USER = 'ops';
    expect(sshForward('http://127.0.0.1:18789/')).to.equal('ssh -N -L 18789:127.0.0.1:18789 ops@192.0.2.1');
    delete process.env.USER;
    process.env.LOGNAME = 'deploy';
    expect(sshForward('http://127.0.0.1:18789/')).to.equal('ssh -N -L 18789:127.0.0.1:18789 deploy@192.0.2.1');
    process.env.USER = '';
    process.env.LOGNAME = '';
    expect(sshForward('http://127.0.0.1:18789/')).to.equal(`ssh -N -L 18789:127.0.0.1:18789 ${userInfo().username}@192.0.2.1`);
    delete process.env.USER;
    delete process.env.LOGNAME;
    expect(sshForward('http://127.0.0.1:18789/')).to.not.match(/ (user)?@/);
  });

  it('is only for a loopback URL reached over SSH', () => {
    delete process.env.SSH_CONNECTION;
    expect(sshForward('http://127.0.0.1:18789/')).to.equal(undefined);
    process.env.SSH_CONNECTION = '198.51.100.7 52000 192.0.2.1 22';
    expect(sshForward('https://gateway.example.org/')).to.equal(undefined);
  });
});
