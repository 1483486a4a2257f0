// A bare HTTP front of an MCP server, for scale in the MCP benchmark: a bare node:http server that
// hands each POST's JSON arguments to the server's echo tool with the MCP client's callTool over the gateway's fetch,
// and answers the result. No auth, policy, validation or records. Prints its port; runs until killed.
import { createServer } from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { upstreamFetch } from '../src/server/kernel/upstream-fetch.ts';

const client = new Client({ name: 'bench-proxy', version: '1' });
await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2]!), { fetch: (input: string | URL, init?: RequestInit) => upstreamFetch(input, init, undefined) }));
const server = createServer(async (req, res) => {
  let body = '';
  for await (const chunk of req) body += chunk;
  const result = await client.callTool({ name: 'echo', arguments: JSON.parse(body) as Record<string, unknown> });
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ result }));
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as { port: number }).port}\n`));
process.on('SIGTERM', () => process.exit(0));
