import { expect } from 'chai';
import { headerToken, mailtoOf, targetOf, unanswerable, withoutQuote } from '../../../../src/server/channels/email/mail.ts';

describe('email: where replies go, what is never answered, what the agent reads', function () {
  it('keeps a reply\'s threading in a mailto: address and reads it back; a bare address is a new message', () => {
    const target = { address: 'alice@example.org', subject: 'Re: Plans & dates?', inReplyTo: '<a1@example.org>', references: ['<r0@example.org>', '<a1@example.org>'] };
    const to = mailtoOf(target);
    expect(to.startsWith('mailto:alice@example.org?')).to.equal(true);
    expect(to).to.not.match(/\s/);
    expect(targetOf(to)).to.deep.equal(target);
    expect(targetOf(' Alice@Example.org ')).to.deep.equal({ address: 'alice@example.org' });
    expect(targetOf('mailto:bob@example.org')).to.deep.equal({ address: 'bob@example.org' });
    for (const bad of ['alice', 'mailto:', 'mailto:not an address', '<alice@example.org>', 'mailto:%zz@example.org']) expect(targetOf(bad), bad).to.equal(undefined);
  });

  it('never answers what says it was sent automatically, lists, bulk, bounces or the account\'s own mail', () => {
    const headers = (pairs: Record<string, string | string[]>) => new Map(Object.entries(pairs).map(([key, value]) => [key, typeof value === 'string' ? [value] : value]));
    const own = 'bot@example.org';
    expect(unanswerable(headers({}), 'alice@example.org', own)).to.equal(undefined);
    expect(unanswerable(headers({ 'auto-submitted': 'no' }), 'alice@example.org', own)).to.equal(undefined);
    expect(unanswerable(headers({ 'auto-submitted': 'auto-replied' }), 'alice@example.org', own)).to.match(/auto-submitted/);
    expect(unanswerable(headers({ 'auto-submitted': 'Auto-Generated' }), 'alice@example.org', own)).to.match(/auto-submitted/);
    expect(unanswerable(headers({ precedence: 'bulk' }), 'alice@example.org', own)).to.match(/bulk/);
    expect(unanswerable(headers({ precedence: 'list' }), 'alice@example.org', own)).to.match(/list/);
    expect(unanswerable(headers({ 'list-id': '<talk.example.org>' }), 'alice@example.org', own)).to.match(/mailing list/);
    expect(unanswerable(headers({ 'x-autoreply': 'yes' }), 'alice@example.org', own)).to.match(/automatic/);
    expect(unanswerable(headers({ 'x-auto-response-suppress': 'OOF, AutoReply' }), 'alice@example.org', own)).to.match(/not to be answered/);
    expect(unanswerable(headers({}), '', own)).to.match(/bounce/);
    expect(unanswerable(headers({}), 'mailer-daemon@example.org', own)).to.match(/mail server/);
    expect(unanswerable(headers({}), own, own)).to.match(/own/);
  });

  it('reads every Auto-Submitted and Precedence header, without comments: any value but "no" is automatic; bulk, list, junk and auto_reply are never answered', () => {
    const headers = (pairs: Record<string, string[]>) => new Map(Object.entries(pairs));
    const person = 'alice@example.org';
    const own = 'bot@example.org';
    expect(unanswerable(headers({ 'auto-submitted': ['no', 'auto-replied'] }), person, own)).to.match(/auto-submitted \(auto-replied\)/);
    expect(unanswerable(headers({ 'auto-submitted': ['auto-generated', 'no'] }), person, own)).to.match(/auto-submitted/);
    expect(unanswerable(headers({ 'auto-submitted': ['no', 'No (a person wrote this)', ' NO '] }), person, own)).to.equal(undefined);
    expect(unanswerable(headers({ 'auto-submitted': ['auto-replied; owner-email="a@example.org"'] }), person, own)).to.match(/auto-submitted/);
    expect(unanswerable(headers({ 'auto-submitted': [''] }), person, own), 'an empty value is not "no"').to.match(/auto-submitted/);
    for (const value of ['bulk (sent by our mailer)', '(newsletter) Bulk', 'list', 'JUNK', 'auto_reply']) {
      expect(unanswerable(headers({ precedence: [value] }), person, own), value).to.match(/bulk|list|junk|automatic reply/);
    }
    expect(unanswerable(headers({ precedence: ['first-class', 'bulk'] }), person, own)).to.match(/bulk mail/);
    expect(unanswerable(headers({ precedence: ['first-class'] }), person, own)).to.equal(undefined);
    expect(unanswerable(headers({ 'x-auto-response-suppress': ['None', 'OOF'] }), person, own)).to.match(/not to be answered/);
    expect(headerToken('bulk (a (nested) comment)')).to.equal('bulk');
    expect(headerToken('(\\) escaped) auto-replied ; x=1')).to.equal('auto-replied');
  });

  it('reads a reply\'s own text without the quote below it; a message that is all quote is read whole', () => {
    expect(withoutQuote('Yes, Tuesday works.\r\n\r\nOn Mon, 2 Nov 2026, Gateway <bot@example.org> wrote:\r\n> Does Tuesday work?\r\n> \r\n')).to.equal('Yes, Tuesday works.');
    expect(withoutQuote('Sounds good\n\nOn Mon, 2 Nov 2026 at 10:00, Gateway <bot@example.org>\nwrote:\n> Does Tuesday work?')).to.equal('Sounds good');
    expect(withoutQuote('> only a quote\n> nothing else')).to.equal('> only a quote\n> nothing else');
    expect(withoutQuote('Inline:\n> a question\nmy answer\n')).to.equal('Inline:\n> a question\nmy answer');
  });
});
