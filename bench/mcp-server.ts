// An MCP server with no login, in a process of its own (as a real one would be), for the MCP benchmark: prints its URL, runs until killed.
import { StrictMcp } from '../test/support/mcp.ts';

const server = await new StrictMcp({ open: true }).start();
process.stdout.write(`${server.url}\n`);
process.on('SIGTERM', () => void server.stop().then(() => process.exit(0)));
