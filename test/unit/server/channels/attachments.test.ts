import { expect } from 'chai';
import { pino } from 'pino';
import { Attachments, cleanName, mediaTypeOf, readLimited } from '../../../../src/server/channels/attachments.ts';
import { namingImages } from '../../../../src/server/models/caller.ts';
import { describeAttachment } from '../../../../src/shared/attachments.ts';
import { freshStore } from '../../../support/store.ts';

const bytes = (...head: number[]) => Uint8Array.from({ length: 64 }, (_, index) => head[index] ?? 0);

for (const engine of ['sqlite', 'postgres'] as const) describe(`files sent with channel messages (${engine})`, () => {
  const current = freshStore(engine);

  it('knows an image by its bytes, never by what its name or the platform claims', () => {
    expect(mediaTypeOf(bytes(0xff, 0xd8, 0xff, 0xe0), 'x.bin', 'application/octet-stream')).to.equal('image/jpeg');
    expect(mediaTypeOf(bytes(0x89, 0x50, 0x4e, 0x47), 'x', undefined)).to.equal('image/png');
    expect(mediaTypeOf(bytes(0x47, 0x49, 0x46, 0x38), 'x', undefined)).to.equal('image/gif');
    expect(mediaTypeOf(Uint8Array.from([...new TextEncoder().encode('RIFF'), 0, 0, 0, 0, ...new TextEncoder().encode('WEBP')]), 'x', undefined)).to.equal('image/webp');
    // Not an image, whatever it says.
    expect(mediaTypeOf(new TextEncoder().encode('#!/bin/sh\necho hi\n'), 'photo.png', 'image/png')).to.equal('application/octet-stream');
    // Other types are taken at their word (parameters dropped), else by the name.
    expect(mediaTypeOf(new TextEncoder().encode('a,b\n1,2\n'), 'x.csv', 'text/csv; charset=utf-8')).to.equal('text/csv');
    expect(mediaTypeOf(new TextEncoder().encode('hello there'), 'notes.txt', undefined)).to.equal('text/plain');
    // Before fetching: what was said.
    expect(mediaTypeOf(undefined, 'photo.jpg', undefined)).to.equal('image/jpeg');
  });

  it('keeps names without folders or control characters, and short', () => {
    expect(cleanName('../../etc/passwd', 'file-1')).to.equal('passwd');
    expect(cleanName('C:\\Users\\me\\report.pdf', 'file-1')).to.equal('report.pdf');
    expect(cleanName('a\u0000b\u001bc.txt', 'file-1')).to.equal('abc.txt');
    expect(cleanName('', 'file-2')).to.equal('file-2');
    expect(cleanName('x'.repeat(500), 'f')).to.have.length(200);
  });

  it('reads a body up to the limit and stops past it, announced or not', async () => {
    expect(await readLimited(new Response(new Uint8Array(10)), 10)).to.have.length(10);
    let error = await readLimited(new Response(new Uint8Array(11), { headers: { 'content-length': '11' } }), 10).catch((e: Error) => e);
    expect(error).to.be.instanceOf(Error).and.to.have.property('name', 'TooLarge');
    const stream = new ReadableStream({ start(controller) { for (let i = 0; i < 5; i++) controller.enqueue(new Uint8Array(4)); controller.close(); } });
    error = await readLimited(new Response(stream), 10).catch((e: Error) => e);
    expect(error).to.have.property('name', 'TooLarge');
    error = await readLimited(new Response('gone', { status: 404 }), 10).catch((e: Error) => e);
    expect((error as Error).message).to.equal('the platform answered 404');
  });

  it('fetches each within the limit, and names what it does not keep with why; only a session\'s own are given back', async () => {
    const attachments = new Attachments(current(), pino({ level: 'silent' }));
    const ok = (data: Uint8Array) => async () => data;
    const fetched = await attachments.fetch([
      { name: 'a.png', mimeType: 'image/png', fetch: ok(bytes(0x89, 0x50, 0x4e, 0x47)) },
      { name: 'big.zip', size: 5000, fetch: async () => { throw new Error('must not be fetched'); } },
      { name: 'liar.bin', fetch: ok(new Uint8Array(2000)) },
      { name: 'down.txt', fetch: async () => { throw new Error('the platform answered 503'); } },
    ], 1000);
    expect(fetched.map((file) => [file.view.name, file.view.kept, file.view.note ?? null])).to.deep.equal([
      ['a.png', true, null],
      ['big.zip', false, "not kept: larger than this channel's limit of 1000 bytes"],
      ['liar.bin', false, "not kept: larger than this channel's limit of 1000 bytes"],
      ['down.txt', false, 'not kept: it could not be fetched (the platform answered 503)'],
    ]);
    const none = await attachments.fetch([{ name: 'a.png', fetch: ok(new Uint8Array(1)) }], 0);
    expect(none[0]!.view).to.include({ kept: false, note: 'not kept: this channel keeps no files (maxAttachmentBytes is 0)' });

    await current().transaction((tx) => attachments.save('telegram', 'default', 'telegram:default:dm:1', fetched, tx));
    const id = fetched[0]!.view.id;
    const loaded = await attachments.load('telegram:default:dm:1', [id, fetched[1]!.view.id]);
    expect([...loaded.keys()]).to.deep.equal([id]);
    expect(Buffer.from(loaded.get(id)!.data).equals(Buffer.from(bytes(0x89, 0x50, 0x4e, 0x47)))).to.equal(true);
    expect((await attachments.load('telegram:default:dm:2', [id])).size, 'another session gets nothing').to.equal(0);
  });

  it('describes a file in one line, and names images to a model that takes none', () => {
    expect(describeAttachment({ id: 'a', name: 'p.jpg', mimeType: 'image/jpeg', size: 35_000, kept: true })).to.equal('[image p.jpg (image/jpeg, 34 KB)]');
    expect(describeAttachment({ id: 'b', name: 'x.pdf', mimeType: 'application/pdf', size: 3 * 1024 * 1024, kept: false, note: 'not kept: too big' })).to.equal('[file x.pdf (application/pdf, 3.0 MB): not kept: too big]');
    const messages = namingImages([
      { role: 'system', content: 's' },
      { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image', name: 'p.png', mimeType: 'image/png', data: new Uint8Array(4096) }] },
    ]);
    expect(messages[1]).to.deep.equal({ role: 'user', content: 'look\n[image p.png (image/png, 4 KB): this model does not take images]' });
  });
});
