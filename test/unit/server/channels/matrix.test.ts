import { expect } from 'chai';
import { homeserverOf } from '../../../../src/server/channels/matrix/api.ts';
import { withoutReplyFallback } from '../../../../src/server/channels/matrix/sync.ts';

describe('matrix: reply fallbacks and where a homeserver may be', () => {
  it('reads a reply without the quote its client put before it, and leaves other text alone', () => {
    expect(withoutReplyFallback('> <@alice:example.org> what was said\n> on two lines\n\nthe answer', true)).to.equal('the answer');
    expect(withoutReplyFallback('> a quote the person wrote\n\nand text', false), 'not a reply: the quote is the person\'s').to.equal('> a quote the person wrote\n\nand text');
    expect(withoutReplyFallback('no quote here', true)).to.equal('no quote here');
    expect(withoutReplyFallback('> only a quote', true)).to.equal('');
  });

  it('takes https anywhere, http only on this host, nothing else', () => {
    expect(homeserverOf('https://matrix.example.org').host).to.equal('matrix.example.org');
    expect(homeserverOf('http://127.0.0.1:8008').port).to.equal('8008');
    expect(homeserverOf('http://localhost:8008').hostname).to.equal('localhost');
    expect(homeserverOf('http://[::1]:8008').hostname).to.equal('[::1]');
    expect(() => homeserverOf('http://matrix.example.org')).to.throw(/https:\/\/ address.*in the clear/);
    expect(() => homeserverOf('ftp://matrix.example.org')).to.throw(/https:\/\//);
    expect(() => homeserverOf(undefined)).to.throw(/set the homeserver/);
  });
});
