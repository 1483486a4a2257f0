import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../cli/base-command.ts';
import { GatewayError } from '../../shared/errors.ts';
import { openBrowser, sshForward } from '../../cli/browser.ts';
import type { McpServerInfo } from '../../shared/protocol/results.ts';

export interface McpLoginResult {
  server: McpServerInfo;
  /** Where the browser was sent; absent when the server needed no login. */
  authorizationUrl?: string;
  callbackUrl: string;
}

export default class McpLogin extends BaseCommand<McpLoginResult> {
  static override summary = 'Log the gateway in to an MCP server with OAuth: prints the authorization URL and waits for the login to finish.';
  static override description = 'Open the URL in any browser. The authorization server then sends that browser back to the gateway\'s callback '
    + '(mcp.callbackUrl, by default the gateway\'s own address), so the browser must reach the gateway: over SSH the command prints the '
    + '`ssh -L` line that forwards it. The tokens go to the profile\'s secret store and are refreshed before they expire.';
  static override examples = ['<%= config.bin %> mcp login docs', '<%= config.bin %> mcp login docs --no-wait --json'];
  static override args = { name: Args.string({ description: 'the MCP server', required: true }) };
  static override flags = {
    url: BaseCommand.urlFlag,
    wait: Flags.boolean({ description: 'wait for the login to finish', default: true, allowNo: true }),
    browser: Flags.boolean({ description: 'open the URL in a browser on a desktop session', default: true, allowNo: true }),
    timeout: Flags.integer({ description: 'seconds to wait for the login', default: 600, min: 1 }),
  };

  async run(): Promise<McpLoginResult> {
    const { args, flags } = await this.parse(McpLogin);
    const client = await this.rpc(this.selectProfile(flags.profile), flags.url);
    let settledServer: McpServerInfo | undefined;
    const settled = new Promise<McpServerInfo>((resolve) => {
      client.on('mcp.status', (payload) => {
        const server = payload as McpServerInfo;
        if (server.name === args.name && server.state === 'connected') resolve((settledServer = server));
      });
    });
    const started = await client.call('mcp.login', { name: args.name }, 60_000);
    if (!started.authorizationUrl) {
      this.say(`MCP server ${args.name} needs no login: ${started.server.state}${started.server.state === 'connected' ? ` with ${started.server.tools} tools` : ''}.`);
      return started;
    }
    // The URL goes to stderr under --json, so stdout stays one JSON document.
    const show = (text: string) => (this.jsonEnabled() ? this.note(text) : this.say(text));
    show(`Open this URL in a browser to log the gateway in to MCP server ${args.name}:\n\n  ${started.authorizationUrl}\n`);
    const forward = sshForward(started.callbackUrl);
    if (forward) show(`The login ends at ${new URL(started.callbackUrl).origin}, on this host. From the computer with the browser, forward it first:\n\n  ${forward}\n`);
    if (flags.browser) openBrowser(started.authorizationUrl);
    if (!flags.wait) return started;
    this.note(`Waiting for the login (up to ${flags.timeout} s; Ctrl-C stops waiting, the link stays valid for 10 minutes)...`);
    let timer: NodeJS.Timeout | undefined;
    const server = await Promise.race([
      settled,
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), flags.timeout * 1000);
      }),
    ]);
    clearTimeout(timer);
    if (!server && !settledServer) {
      throw new GatewayError(`The login with MCP server ${args.name} did not finish within ${flags.timeout} s.`, { hints: [`gateway mcp list   # its state`, `gateway mcp login ${args.name}   # start again`] });
    }
    const done = server ?? settledServer!;
    this.say(`Logged in: MCP server ${args.name} is connected with ${done.tools} tool${done.tools === 1 ? '' : 's'}.`);
    return { ...started, server: done };
  }
}
