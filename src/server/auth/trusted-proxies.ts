import ipaddr from 'ipaddr.js';

/** A matcher for gateway.trustedProxies: addresses or CIDRs, IPv4-mapped IPv6 included. */
export function addressMatcher(cidrs: readonly string[]): (address: string) => boolean {
  const ranges = cidrs.map((cidr) => {
    const [address, bits] = cidr.includes('/') ? ipaddr.parseCIDR(cidr) : [ipaddr.parse(cidr), cidr.includes(':') ? 128 : 32];
    return [ipaddr.process(address.toString()), bits] as const;
  });
  return (address: string) => {
    if (!ipaddr.isValid(address)) return false;
    const parsed = ipaddr.process(address);
    return ranges.some(([range, bits]) => parsed.kind() === range.kind() && parsed.match(range as never, bits));
  };
}
