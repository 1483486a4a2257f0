import { expect } from 'chai';
import { EventStreamParser } from '../../../src/server/mcp/direct-call.ts';

describe('the event stream of an MCP call', () => {
  const parse = (chunks: string[]) => {
    const events: string[] = [];
    const parser = new EventStreamParser((data) => events.push(data));
    for (const chunk of chunks) parser.push(chunk);
    return { events, parser };
  };

  it('dispatches each event\'s data at its blank line, whatever the line endings and however the chunks fall', () => {
    const stream = 'id: 1\nretry: 50\ndata: \n\nevent: message\ndata: {"a":\ndata: 1}\n\n: a comment\r\ndata:{"b":2}\r\n\r\nid: 7\rdata: {"c":3}\r\r';
    const whole = parse([stream]);
    // The last CR may be the first half of a CRLF: the event it ends waits for what comes next.
    expect(whole.events).to.deep.equal(['', '{"a":\n1}', '{"b":2}']);
    whole.parser.push('\n');
    expect(whole.events).to.deep.equal(['', '{"a":\n1}', '{"b":2}', '{"c":3}']);
    expect(whole.parser.lastEventId).to.equal('7');
    expect(whole.parser.retryMs).to.equal(50);
    // One character at a time: a CRLF split between chunks is one line end, not two.
    const split = parse([...stream, '\n']);
    expect(split.events).to.deep.equal(whole.events);
  });

  it('skips events of other types, and keeps an event that has not ended yet until it does', () => {
    const { events, parser } = parse(['event: ping\ndata: {}\n\n', 'data: {"x":1}\n']);
    expect(events).to.deep.equal([]);
    parser.push('\n');
    expect(events).to.deep.equal(['{"x":1}']);
    parser.push('retry: soon\nid: a\u0000b\n\n');
    expect(parser.retryMs).to.equal(undefined);
    expect(parser.lastEventId).to.equal(undefined);
  });
});
