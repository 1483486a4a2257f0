/**
 * Where web.fetch and the browser (browser-proxy.ts) may connect: public
 * addresses only, decided on the addresses a name resolves to (every one of
 * them), at connect time, so what was checked is what is connected to, on
 * the first request and on every redirect. Loopback, private, link-local
 * (cloud metadata at 169.254.169.254 among them), carrier-grade NAT,
 * multicast, reserved and unspecified ranges are refused unless
 * tools.web.allowPrivate names the host and port.
 *
 * An address is judged by what it is, not how it is written: every spelling
 * of it (2130706433, 0177.0.0.1, 0x7f.1, 127.1; ::FFFF:7f00:0001; a zone id)
 * is first read as the WHATWG URL parser reads a host, the parser web.fetch's
 * addresses come through. IPv6 that carries an IPv4 address is judged so:
 * IPv4-mapped (::ffff:0:0/96) and NAT64's well-known prefix (64:ff9b::/96,
 * which DNS64 gives every IPv4-only site on an IPv6-only network) by the IPv4
 * address inside; the forms where the IPv4 address cannot be told or that no
 * public site uses are refused whatever they carry: IPv4-compatible
 * (::/96, deprecated), IPv4-translated (::ffff:0:0:0/96), local-use NAT64
 * (64:ff9b:1::/48, its translator's choice), 6to4 (2002::/16) and Teredo
 * (2001::/32).
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** Resolves a host name to every address it has. */
export type Resolver = (host: string) => Promise<LookupAddress[]>;

export const systemResolver: Resolver = (host) => new Promise((resolve, reject) => {
  dnsLookup(host, { all: true, verbatim: true }, (error, addresses) => (error ? reject(error) : resolve(addresses)));
});

/** What each of ipaddr.js's ranges is called in a refusal; any other range but unicast is "a reserved address". */
const REFUSED_RANGES: Record<string, string> = {
  loopback: 'a loopback address',
  private: 'a private address',
  uniqueLocal: 'a private address',
  linkLocal: 'a link-local address',
  deprecatedSiteLocal: 'a site-local address',
  carrierGradeNat: 'a carrier-grade NAT address',
  unspecified: 'an unspecified address',
  multicast: 'a multicast address',
  broadcast: 'a broadcast address',
  rfc6145: 'an IPv4-translated address (::ffff:0:0:0/96)',
  rfc6052: 'a local-use NAT64 address (64:ff9b:1::/48)',
  '6to4': 'a 6to4 address (2002::/16)',
  teredo: 'a Teredo address (2001::/32)',
};

/** NAT64's well-known prefix: the IPv4 address is the last 32 bits. */
const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96');

/** Characters an address can be written with (IPv4 in any base, IPv6); anything else is a name. */
const ADDRESS_CHARACTERS = /^[0-9a-fx.:]+$/i;

/**
 * An address in its one canonical form (127.0.0.1, ::7f00:1), read as the
 * WHATWG URL parser reads a host, a zone id dropped; undefined for a name.
 * ipaddr.js alone would read ::127.0.0.1 as ::ffff:127.0.0.1.
 */
export function canonicalAddress(text: string): string | undefined {
  const bare = text.replace(/^\[|\]$/g, '').replace(/%.*$/s, '');
  if (!ADDRESS_CHARACTERS.test(bare)) return undefined;
  let host: string;
  try {
    host = new URL(`http://${bare.includes(':') ? `[${bare}]` : bare}/`).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return undefined;
  }
  return isIP(host) ? host : undefined;
}

/** Why an address is not one to fetch from, or undefined for a public one. */
export function addressProblem(address: string): string | undefined {
  const canonical = canonicalAddress(address);
  if (canonical === undefined) return 'not an IP address';
  let parsed = ipaddr.parse(canonical);
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6;
    if (v6.range() === 'ipv4Mapped') parsed = v6.toIPv4Address();
    else if (v6.match(NAT64_WELL_KNOWN)) parsed = ipaddr.fromByteArray(v6.toByteArray().slice(12));
    else if (v6.range() === 'unicast' && v6.parts.slice(0, 6).every((part) => part === 0)) return 'an IPv4-compatible address (::/96, deprecated)';
  }
  if (parsed.kind() === 'ipv4' && parsed.toString() === '169.254.169.254') return 'a cloud metadata address';
  if (parsed.kind() === 'ipv6' && parsed.toNormalizedString() === 'fd00:ec2:0:0:0:0:0:254') return 'a cloud metadata address';
  const range = parsed.range();
  if (range === 'unicast') return undefined;
  return REFUSED_RANGES[range] ?? 'a reserved address';
}

export class AddressRefused extends Error {}

/**
 * The addresses of a host that may be connected to for a port, or a refusal
 * saying why: every address the name has must be public (a name that also
 * resolves to 127.0.0.1 is refused, whatever else it has), unless
 * `allowPrivate` lists "host:port". `tool` names who asks, in the refusal.
 */
export async function checkedAddresses(host: string, port: number, allowPrivate: readonly string[], resolve: Resolver, tool = 'web.fetch'): Promise<LookupAddress[]> {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const literal = canonicalAddress(bare);
  const allowed = allowPrivate.some((entry) => allowedEntry(entry, literal ?? bare.toLowerCase(), port));
  // An address written as such is the one connected to, in its canonical form: what was judged.
  const addresses = literal ? [{ address: literal, family: isIP(literal) }] : await resolve(bare);
  if (addresses.length === 0) throw new AddressRefused(`${bare} has no address.`);
  if (allowed) return addresses;
  for (const { address } of addresses) {
    const problem = addressProblem(address);
    if (problem) {
      const named = literal ?? bare;
      throw new AddressRefused(`${bare}${literal !== undefined || bare === address ? '' : ` resolves to ${address}, which`} is ${problem}; ${tool} reaches only public addresses (allow this one with tools.web.allowPrivate ["${named.includes(':') ? `[${named}]` : named}:${port}"]).`);
    }
  }
  return addresses;
}

/** Whether an allowPrivate entry ("host:port", "[v6]:port") names this host (canonical address or lower-case name) and port. */
function allowedEntry(entry: string, host: string, port: number): boolean {
  const colon = entry.lastIndexOf(':');
  if (colon <= 0 || entry.slice(colon + 1) !== String(port)) return false;
  const named = entry.slice(0, colon);
  return (canonicalAddress(named) ?? named.toLowerCase()) === host;
}
