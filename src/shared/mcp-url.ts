/** What the gateway accepts as an MCP server's address: the CLI and the daemon's configuration check say the same. */
const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

/** Whether a URL's hostname names this host. */
export const isLoopbackHost = (hostname: string): boolean => LOOPBACK.test(hostname);

/** Why an address cannot be an MCP server's, or undefined when it can: https, or http on this host only (tokens never cross a network in clear). */
export function mcpUrlProblem(raw: string): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `${JSON.stringify(raw)} is not a URL; give the server's streamable HTTP address, such as https://mcp.example.com/mcp`;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return `the address must be http(s), not ${url.protocol}`;
  if (url.protocol === 'http:' && !LOOPBACK.test(url.hostname)) return `plain http is accepted only on this host (localhost, 127.0.0.1, [::1]); use https for ${url.host}`;
  if (url.username || url.password) return 'leave credentials out of the address; pass a header instead (its value goes to the secret store)';
  if (url.hash) return 'the address must not have a #fragment';
  return undefined;
}
