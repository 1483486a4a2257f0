import { expect } from 'chai';
import { freePort, Home } from '../support/cli.ts';
import { RawSocket } from '../support/ws-client.ts';

/** A small companion node: declares commands and answers the gateway's node.invoke events. */
class TestNode {
  readonly socket: RawSocket;
  private stopped = false;

  constructor(port: number) {
    this.socket = new RawSocket(`ws://127.0.0.1:${port}/`);
  }

  async connect(token: string, commands: string[]): Promise<any> {
    const hello = await this.socket.connect({ token }, [], {
      role: 'node',
      clientId: 'kitchen-pi',
      tamper: (params) => {
        params.caps = ['camera'];
        params.commands = commands;
        params.permissions = { camera: true };
      },
    });
    void this.serve();
    return hello;
  }

  private async serve(): Promise<void> {
    while (!this.stopped) {
      const event = await this.socket.next((frame) => frame.event === 'node.invoke', 60_000).catch(() => undefined);
      if (!event) continue;
      const { invocationId, command, args } = event.payload;
      if (command === 'echo') this.socket.send({ type: 'req', id: `r-${invocationId}`, method: 'node.invoke.result', params: { invocationId, ok: true, result: { echoed: args } } });
      if (command === 'fail') this.socket.send({ type: 'req', id: `r-${invocationId}`, method: 'node.invoke.result', params: { invocationId, ok: false, error: 'lens cap on' } });
      // "hang" is never answered.
    }
  }

  close(): void {
    this.stopped = true;
    this.socket.close();
  }
}

describe('companion nodes (e2e)', function () {
  let home: Home;
  let port: number;
  let node: TestNode;

  beforeEach(async () => {
    port = await freePort();
    home = new Home({ GATEWAY_PORT: String(port) });
    await home.run(['config', 'set', 'gateway.nodes.denyCommands', '["shell.*"]']);
    expect((await home.run(['start'])).code).to.equal(0);
    node = new TestNode(port);
    const token = home.token();
    const hello = await node.connect(token, ['echo', 'fail', 'hang', 'shell.exec']);
    expect(hello.ok).to.equal(true);
    expect(hello.payload.role).to.equal('node');
  });
  afterEach(() => {
    node.close();
    home.cleanup();
  });

  it('lists nodes with their declared caps and the commands the policy allows', async () => {
    const list = await home.run(['nodes', 'list', '--json']);
    expect(list.code, list.stderr).to.equal(0);
    expect(list.json.nodes).to.have.length(1);
    expect(list.json.nodes[0]).to.deep.include({ clientId: 'kitchen-pi', caps: ['camera'], commands: ['echo', 'fail', 'hang'], deniedCommands: ['shell.exec'] });
  });

  it('relays a command and returns the node\'s result', async () => {
    const result = await home.run(['nodes', 'invoke', 'kitchen-pi', 'echo', '--args', '{"width":640}', '--json']);
    expect(result.code, result.stderr).to.equal(0);
    expect(result.json.result).to.deep.equal({ echoed: { width: 640 } });
  });

  it('reports a timeout, a failure, a denied or unknown command, and an unknown node', async () => {
    const hang = await home.run(['nodes', 'invoke', 'kitchen-pi', 'hang', '--timeout', '1s', '--json']);
    expect(hang.code).to.equal(1);
    expect(hang.json.error.code).to.equal('UNAVAILABLE');
    expect(hang.json.error.message).to.include('did not answer hang within 1000 ms');
    const failed = await home.run(['nodes', 'invoke', 'kitchen-pi', 'fail', '--json']);
    expect(failed.json.error.message).to.include('lens cap on');
    const denied = await home.run(['nodes', 'invoke', 'kitchen-pi', 'shell.exec', '--json']);
    expect(denied.json.error.code).to.equal('FORBIDDEN');
    const unknown = await home.run(['nodes', 'invoke', 'kitchen-pi', 'teleport', '--json']);
    expect(unknown.code).to.equal(5);
    const nobody = await home.run(['nodes', 'invoke', 'attic-pi', 'echo', '--json']);
    expect(nobody.code).to.equal(5);
    const badArgs = await home.run(['nodes', 'invoke', 'kitchen-pi', 'echo', '--args', '{oops']);
    expect(badArgs.code).to.equal(2);
  });

  it('keeps nodes to their own methods', async () => {
    const denied = await node.socket.call('config.set', { key: 'log.level', value: 'debug' });
    expect(denied.error.code).to.equal('FORBIDDEN');
    const stray = await node.socket.call('node.invoke.result', { invocationId: 'nope', ok: true });
    expect(stray.error.code).to.equal('NOT_FOUND');
  });
});
