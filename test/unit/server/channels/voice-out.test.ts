import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { xml } from '@xmpp/client';
import { oggOpusSeconds } from '../../../../src/server/channels/audio-length.ts';
import { voiceMessage } from '../../../../src/server/channels/matrix/voice.ts';
import { outOfBand } from '../../../../src/server/channels/xmpp/oob.ts';

const ogg = (seconds: number) => execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', `sine=frequency=440:duration=${seconds}`, '-c:a', 'libopus', '-f', 'ogg', '-']);
const account = { jid: 'bot@example.org' };
const offer = (url: string, body = url) => xml('message', { from: 'ann@example.org/phone', type: 'chat' }, xml('body', {}, body), xml('x', { xmlns: 'jabber:x:oob' }, xml('url', {}, url)));
/** Why the gateway would not fetch an offered file, decided before any connection is made. */
const refusal = async (url: string) => {
  const { attachments } = outOfBand(offer(url), url, account);
  return attachments[0]!.fetch(1024, AbortSignal.timeout(5000)).then(() => 'fetched', (error: Error) => error.message);
};

describe('voice notes out: their length, and the Matrix message that shows one', () => {
  it('reads an OGG/Opus file\'s seconds from its last page, less the pre-skip; none for other bytes', () => {
    for (const seconds of [1, 3.5]) expect(oggOpusSeconds(ogg(seconds))).to.be.closeTo(seconds, 0.03);
    expect(oggOpusSeconds(Buffer.from('OggS but nothing more'.repeat(10)))).to.equal(undefined);
    expect(oggOpusSeconds(Buffer.from('not audio at all'))).to.equal(undefined);
  });

  it('shows a voice note as m.audio marked as voice (MSC3245) with its duration in milliseconds, in its thread', () => {
    const data = ogg(2);
    const content = voiceMessage({ data, mimeType: 'audio/ogg', name: 'answer.ogg' }, 'mxc://example.org/abc', '$root');
    expect(content).to.deep.include({ msgtype: 'm.audio', body: 'Voice message', filename: 'answer.ogg', url: 'mxc://example.org/abc', 'org.matrix.msc3245.voice': {} });
    expect((content.info as any).duration).to.be.closeTo(2000, 30);
    expect((content['org.matrix.msc1767.audio'] as any).duration).to.equal((content.info as any).duration);
    expect(content['m.relates_to']).to.include({ rel_type: 'm.thread', event_id: '$root' });
  });
});

describe('xmpp: files offered out of band (XEP-0066)', () => {
  it('takes the offered URL as a file, and a body that is only the URL as no words', () => {
    const url = 'https://upload.example.org/x1/2024%20voice.m4a';
    const only = outOfBand(offer(url), url, account);
    expect(only.text).to.equal('');
    expect(only.attachments.map((file) => file.name)).to.deep.equal(['2024 voice.m4a']);
    expect(outOfBand(offer(url, 'listen to this'), 'listen to this', account).text).to.equal('listen to this');
    const plain = xml('message', { type: 'chat' }, xml('body', {}, 'hello'));
    expect(outOfBand(plain, 'hello', account)).to.deep.equal({ text: 'hello', attachments: [] });
    expect(outOfBand(offer('file:///etc/passwd', 'x'), 'x', account).attachments, 'only http(s) URLs').to.deep.equal([]);
  });

  // Loopback over http, let through when the account's server is on this host, is tested end to end (voice-channels.test.ts).
  it('refuses, before connecting, what is not https from a public address (loopback only when the account\'s server is on this host)', async () => {
    expect(await refusal('http://upload.example.org/a.m4a')).to.match(/is not https/);
    expect(await refusal('https://127.0.0.1/a.m4a')).to.match(/on this host \(127\.0\.0\.1\), and the account's server is not/);
    expect(await refusal('https://localhost/a.m4a')).to.match(/the account's server is not/);
    expect(await refusal('https://10.1.2.3/a.m4a')).to.match(/private address/);
    expect(await refusal('https://169.254.169.254/latest/meta-data')).to.match(/linkLocal address/);
    expect(await refusal('https://[::ffff:127.0.0.1]/a.m4a')).to.match(/on this host/);
  });
});
