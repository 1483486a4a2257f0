import { expect } from 'chai';
import type { Principal } from '../../../src/server/kernel/module.ts';
import { apiPerson, automationPerson, callerPerson, OPERATOR, peerPerson } from '../../../src/server/kernel/person.ts';

const principal = (fields: Partial<Principal>): Principal => ({ kind: 'token', subject: 'gateway', scopes: new Set(['inference']), ...fields });

describe('who a conversation is with', () => {
  it('on a channel: the sender by the channel\'s stable id, within its channel and account, never by name', () => {
    expect(peerPerson('telegram', 'default', '6000001')).to.equal('peer:telegram:default:6000001');
    expect(peerPerson('irc', 'libera', 'alice')).to.not.equal(peerPerson('irc', 'oftc', 'alice'));
    // A Matrix id holds colons: the sender is the rest of the key, after the channel and the account, which hold none.
    expect(peerPerson('matrix', 'default', '@alice:example.org')).to.equal('peer:matrix:default:@alice:example.org');
  });

  it('over HTTP and the WebSocket: the operator for a credential holding every scope, else the credential itself', () => {
    for (const kind of ['gateway', 'service', 'anonymous', 'proxy-user', 'overlay'] as const) expect(callerPerson(principal({ kind, subject: kind, scopes: 'all' }))).to.equal(OPERATOR);
    expect(callerPerson(principal({ credentialId: 'token:tok_1' }))).to.equal('credential:token%3Atok_1');
    // Two tokens of one owner are two callers.
    expect(callerPerson(principal({ credentialId: 'token:tok_2' }))).to.not.equal(callerPerson(principal({ credentialId: 'token:tok_1' })));
    expect(callerPerson(principal({ kind: 'jwt', subject: 'jwt:ada' }))).to.equal('credential:jwt%3Aada');
  });

  it('on the inference API: the request\'s user within its credential; without one, the credential alone, sharing nothing with its users', () => {
    const gateway = principal({ kind: 'gateway', scopes: 'all' });
    const token = principal({ credentialId: 'token:tok_1' });
    expect(apiPerson(gateway, 'alice')).to.equal('user:gateway:alice');
    expect(apiPerson(token, 'alice')).to.equal('user:token%3Atok_1:alice');
    expect(apiPerson(token, 'alice')).to.not.equal(apiPerson(gateway, 'alice'));
    expect(apiPerson(token, undefined)).to.equal('credential:token%3Atok_1');
    expect(apiPerson(token, ''), 'an empty user is none').to.equal(apiPerson(token, undefined));
    expect(apiPerson(gateway, undefined)).to.equal(OPERATOR);
    // A user's name cannot reach into another credential's people, colons and all.
    expect(apiPerson(principal({ kind: 'jwt', subject: 'jwt:a' }), 'b:c')).to.not.equal(apiPerson(principal({ kind: 'jwt', subject: 'jwt:a:b' }), 'c'));
    expect(apiPerson(token, 'operator')).to.not.equal(OPERATOR);
  });

  it('for an automation: the automation', () => {
    expect(automationPerson('morning')).to.equal('automation:morning');
  });
});
