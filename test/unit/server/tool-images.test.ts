import { expect } from 'chai';
import { heldToolImage, holdToolImage, TOOL_IMAGE_LIMITS } from '../../../src/server/kernel/tool-images.ts';
import { withToolImages } from '../../../src/server/models/caller.ts';
import type { ChatMessage } from '../../../src/server/models/types.ts';

const png = (size: number) => new Uint8Array(size).fill(1);

describe('images a tool made, for a model that takes images', () => {
  it('shows the last step\'s images after its results, as a turn of pictures; earlier steps\' stay named', () => {
    const old = holdToolImage(png(10), 'image/png', 'screenshots/old.png');
    const now = holdToolImage(png(20), 'image/png', 'screenshots/now.png');
    const messages: ChatMessage[] = [
      { role: 'user', content: 'look' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'a', name: 'browser.screenshot', args: {} }] },
      { role: 'tool', toolCallId: 'a', toolName: 'browser.screenshot', content: { path: old.name, image: old } },
      { role: 'assistant', content: '', toolCalls: [{ id: 'b', name: 'browser.screenshot', args: {} }, { id: 'c', name: 'web.fetch', args: {} }] },
      { role: 'tool', toolCallId: 'b', toolName: 'browser.screenshot', content: { path: now.name, image: now } },
      { role: 'tool', toolCallId: 'c', toolName: 'web.fetch', content: { status: 200 } },
    ];
    const shown = withToolImages(messages);
    expect(shown.slice(0, messages.length)).to.deep.equal(messages);
    expect(shown).to.have.length(messages.length + 1);
    const pictures = shown.at(-1)!;
    expect(pictures.role).to.equal('user');
    expect(pictures.content).to.deep.equal([
      { type: 'text', text: 'The image browser.screenshot made (screenshots/now.png):' },
      { type: 'image', name: 'screenshots/now.png', mimeType: 'image/png', data: png(20) },
    ]);
    // Nothing to show: the conversation as it was.
    expect(withToolImages(messages.slice(0, 3).concat({ role: 'assistant', content: 'done' }))).to.have.length(4);
  });

  it('holds images a short while and within bounds; a reference it no longer holds is only a name', () => {
    const first = holdToolImage(png(5), 'image/png', 'a.png', Date.now() - TOOL_IMAGE_LIMITS.heldMs - 1);
    expect(heldToolImage({ image: first })).to.equal(undefined);
    const refs = Array.from({ length: TOOL_IMAGE_LIMITS.count + 1 }, (_, i) => holdToolImage(png(1), 'image/png', `${i}.png`));
    expect(heldToolImage({ image: refs[0] }), 'the oldest let go past the count').to.equal(undefined);
    expect(heldToolImage({ image: refs.at(-1) })?.name).to.equal(`${TOOL_IMAGE_LIMITS.count}.png`);
    expect(heldToolImage({ image: { ref: 'img_made_up' } })).to.equal(undefined);
    expect(heldToolImage('text')).to.equal(undefined);
  });
});
