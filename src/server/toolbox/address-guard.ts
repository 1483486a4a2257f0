/**
 * Where web.fetch may connect: public addresses only, decided on the
 * addresses a name resolves to (every one of them), at connect time, so what
 * was checked is what is connected to, on the first request and on every
 * redirect. Loopback, private, link-local (cloud metadata at 169.254.169.254
 * among them), carrier-grade NAT, multicast, reserved and unspecified ranges
 * are refused unless tools.web.allowPrivate names the host and port.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import ipaddr from 'ipaddr.js';

/** Resolves a host name to every address it has. */
export type Resolver = (host: string) => Promise<LookupAddress[]>;

export const systemResolver: Resolver = (host) => new Promise((resolve, reject) => {
  dnsLookup(host, { all: true, verbatim: true }, (error, addresses) => (error ? reject(error) : resolve(addresses)));
});

const REFUSED_RANGES: Record<string, string> = {
  loopback: 'a loopback address',
  private: 'a private address',
  uniqueLocal: 'a private address',
  linkLocal: 'a link-local address',
  carrierGradeNat: 'a carrier-grade NAT address',
  unspecified: 'an unspecified address',
  multicast: 'a multicast address',
  broadcast: 'a broadcast address',
  reserved: 'a reserved address',
  benchmarking: 'a reserved address',
  amt: 'a reserved address',
  as112: 'a reserved address',
  deprecated: 'a reserved address',
  orchid2: 'a reserved address',
  droneRemoteIdProtocolEntityTags: 'a reserved address',
  rfc6145: 'a reserved address',
  rfc6052: 'a reserved address',
  '6to4': 'a reserved address',
  teredo: 'a reserved address',
  ipv4Mapped: 'a reserved address',
  discard: 'a reserved address',
};

/** Why an address is not one to fetch from, or undefined for a public one. */
export function addressProblem(address: string): string | undefined {
  if (!ipaddr.isValid(address)) return 'not an IP address';
  let parsed = ipaddr.parse(address);
  // An IPv4 address written as IPv6 (::ffff:127.0.0.1) is judged as what it is.
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  if (parsed.kind() === 'ipv4' && parsed.toString() === '169.254.169.254') return 'a cloud metadata address';
  if (parsed.kind() === 'ipv6' && parsed.toNormalizedString() === 'fd00:ec2:0:0:0:0:0:254') return 'a cloud metadata address';
  const range = parsed.range();
  if (range === 'unicast') return undefined;
  return REFUSED_RANGES[range] ?? `a ${range} address`;
}

export class AddressRefused extends Error {}

/**
 * The addresses of a host that may be connected to for a port, or a refusal
 * saying why: every address the name has must be public (a name that also
 * resolves to 127.0.0.1 is refused, whatever else it has), unless
 * `allowPrivate` lists "host:port".
 */
export async function checkedAddresses(host: string, port: number, allowPrivate: readonly string[], resolve: Resolver): Promise<LookupAddress[]> {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const allowed = allowPrivate.some((entry) => entry.toLowerCase() === `${bare.toLowerCase()}:${port}` || entry.toLowerCase() === `[${bare.toLowerCase()}]:${port}`);
  const addresses = ipaddr.isValid(bare) ? [{ address: bare, family: ipaddr.parse(bare).kind() === 'ipv6' ? 6 : 4 }] : await resolve(bare);
  if (addresses.length === 0) throw new AddressRefused(`${bare} has no address.`);
  if (allowed) return addresses;
  for (const { address } of addresses) {
    const problem = addressProblem(address);
    if (problem) {
      throw new AddressRefused(`${bare}${bare === address ? '' : ` resolves to ${address}, which`} is ${problem}; web.fetch reaches only public addresses (allow this one with tools.web.allowPrivate ["${bare.includes(':') ? `[${bare}]` : bare}:${port}"]).`);
    }
  }
  return addresses;
}
