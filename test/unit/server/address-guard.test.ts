import { expect } from 'chai';
import { addressProblem, AddressRefused, canonicalAddress, checkedAddresses, type Resolver } from '../../../src/server/toolbox/address-guard.ts';

/** The refusal a check ends in. */
async function refusal(check: Promise<unknown>): Promise<Error> {
  try {
    await check;
  } catch (error) {
    expect(error).to.be.instanceOf(AddressRefused);
    return error as Error;
  }
  throw new Error('expected a refusal');
}

/** A resolver that answers from a table, never from DNS: no test connects to these addresses. */
const table = (entries: Record<string, string[]>): Resolver => async (host) => (entries[host] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

describe('web.fetch address guard (resolver stubbed)', () => {
  it('refuses every range that is not the public internet, naming it', () => {
    const cases: [string, RegExp][] = [
      ['169.254.169.254', /cloud metadata/], ['fd00:ec2::254', /cloud metadata/], ['169.254.10.1', /link-local/], ['fe80::1', /link-local/],
      ['10.0.0.5', /private/], ['172.16.3.4', /private/], ['192.168.1.1', /private/], ['fc00::1', /private/], ['fd12:3456::1', /private/],
      ['100.64.0.1', /carrier-grade NAT/], ['127.0.0.1', /loopback/], ['::1', /loopback/], ['::ffff:10.0.0.1', /private/], ['::ffff:169.254.169.254', /cloud metadata/],
      ['0.0.0.0', /unspecified/], ['::', /unspecified/], ['224.0.0.1', /multicast/], ['ff02::1', /multicast/], ['255.255.255.255', /broadcast/], ['240.0.0.1', /reserved/],
    ];
    for (const [address, why] of cases) expect(addressProblem(address), address).to.match(why);
    for (const address of ['93.184.216.34', '1.1.1.1', '2606:4700:4700::1111', '8.8.8.8']) expect(addressProblem(address), address).to.equal(undefined);
  });

  it('judges an address by what it is, however it is written: IPv4 in any base, IPv6 in any case, padding or zone', () => {
    const loopback = [
      '2130706433', '0x7f000001', '017700000001', '0177.0.0.1', '0x7f.1', '127.1', '127.0.1', '0x7F.0.0.0x1',
      '::ffff:127.0.0.1', '::FFFF:127.0.0.1', '::ffff:7f00:1', '::FFFF:7F00:0001', '0:0:0:0:0:ffff:7f00:0001', '0000:0000:0000:0000:0000:ffff:7f00:0001',
      '::ffff:127.0.0.1%eth0', '[::ffff:7f00:1]', '::1%lo', '0:0:0:0:0:0:0:1', '0000::0001',
    ];
    for (const address of loopback) expect(addressProblem(address), address).to.match(/loopback/);
    expect(canonicalAddress('0x7f.1')).to.equal('127.0.0.1');
    expect(canonicalAddress('::FFFF:7F00:0001')).to.equal('::ffff:7f00:1');
    expect(canonicalAddress('::127.0.0.1'), 'IPv4-compatible, not mapped').to.equal('::7f00:1');
    for (const name of ['example.org', 'cafe', '1.2.3.4.5', '127.0.0.1/x', '::1]:80', '', '127.0.0.1 ']) expect(canonicalAddress(name), name).to.equal(undefined);
    expect(addressProblem('fe80::1%eth0')).to.match(/link-local/);
    expect(addressProblem('::ffff:a9fe:a9fe')).to.match(/cloud metadata/);
    expect(addressProblem('::ffff:0a00:0001')).to.match(/private/);
  });

  it('refuses IPv6 that carries IPv4 where the IPv4 address cannot be told or no public site uses the form, and judges NAT64\'s well-known prefix by the IPv4 inside', () => {
    const cases: [string, RegExp][] = [
      // IPv4-compatible (::/96, deprecated): refused whatever it carries, in every spelling.
      ['::127.0.0.1', /IPv4-compatible/], ['::7f00:1', /IPv4-compatible/], ['0:0:0:0:0:0:7f00:1', /IPv4-compatible/], ['::0:127.0.0.1', /IPv4-compatible/],
      ['::8.8.8.8', /IPv4-compatible/], ['::a9fe:a9fe', /IPv4-compatible/], ['::2', /IPv4-compatible/],
      // IPv4-translated (::ffff:0:0:0/96).
      ['::ffff:0:7f00:1', /IPv4-translated/], ['::ffff:0:808:808', /IPv4-translated/],
      // 6to4 (2002::/16): refused whatever IPv4 address it embeds.
      ['2002:7f00:1::1', /6to4/], ['2002:a9fe:a9fe::', /6to4/], ['2002:808:808::1', /6to4/], ['2002::', /6to4/],
      // Teredo (2001::/32): refused.
      ['2001:0:4136:e378:8000:63bf:3fff:fdd2', /Teredo/], ['2001::1', /Teredo/], ['2001:0000:7f00:0001::', /Teredo/],
      // NAT64, well-known prefix: judged by the IPv4 address in its last 32 bits.
      ['64:ff9b::7f00:1', /loopback/], ['64:ff9b::127.0.0.1', /loopback/], ['64:FF9B::A9FE:A9FE', /cloud metadata/], ['64:ff9b::10.0.0.1', /private/],
      ['64:ff9b::0.0.0.0', /unspecified/],
      // NAT64, local-use (64:ff9b:1::/48): where the IPv4 address sits is the translator's choice, so refused.
      ['64:ff9b:1::7f00:1', /local-use NAT64/], ['64:ff9b:1::808:808', /local-use NAT64/], ['64:ff9b:1:ffff::', /local-use NAT64/],
      ['fec0::1', /site-local/], ['5f00::1', /reserved/], ['2001:db8::1', /reserved/], ['100::1', /reserved/],
    ];
    for (const [address, why] of cases) expect(addressProblem(address), address).to.match(why);
    for (const address of ['64:ff9b::808:808', '64:ff9b::1.1.1.1', '::ffff:8.8.8.8', '::ffff:808:808']) expect(addressProblem(address), address).to.equal(undefined);
  });

  it('refuses an address host in every spelling before any lookup, and allowPrivate matches an address however either is written', async () => {
    const resolve: Resolver = async (host) => {
      throw new Error(`looked up ${host}`);
    };
    for (const host of ['2130706433', '0177.0.0.1', '0x7f.1', '127.1', '[::127.0.0.1]', '[::ffff:7f00:1]', '::FFFF:127.0.0.1', '[64:ff9b::a9fe:a9fe]', '2002:7f00:1::']) {
      expect((await refusal(checkedAddresses(host, 80, [], resolve))).message, host).to.match(/ is an? [^;]*address[^;]*; web\.fetch reaches only public addresses/);
    }
    expect(await checkedAddresses('[::FFFF:7F00:0001]', 8080, ['[::ffff:127.0.0.1]:8080'], resolve)).to.deep.equal([{ address: '::ffff:7f00:1', family: 6 }]);
    expect(await checkedAddresses('127.0.0.1', 8080, ['0x7f.1:8080'], resolve)).to.deep.equal([{ address: '127.0.0.1', family: 4 }]);
    expect((await refusal(checkedAddresses('127.1', 8080, [], resolve))).message).to.include('tools.web.allowPrivate ["127.0.0.1:8080"]');
    // A name that resolves to a spelling of a private address is judged by what the address is.
    const table2 = table({ 'sly.example': ['93.184.216.34', '::7f00:1'], 'mapped.example': ['::ffff:a00:1'] });
    expect((await refusal(checkedAddresses('sly.example', 443, [], table2))).message).to.match(/resolves to ::7f00:1, which is an IPv4-compatible address/);
    expect((await refusal(checkedAddresses('mapped.example', 443, [], table2))).message).to.match(/a private address/);
  });

  it('judges a name by every address it resolves to, and lets through only the host:port allowPrivate names', async () => {
    const resolve = table({
      'public.example': ['93.184.216.34', '2606:2800:220:1::248'],
      'rebinding.example': ['93.184.216.34', '169.254.169.254'],
      'wiki.internal': ['10.1.2.3'],
      'nothing.example': [],
    });
    expect(await checkedAddresses('public.example', 443, [], resolve)).to.have.length(2);
    expect((await refusal(checkedAddresses('rebinding.example', 443, [], resolve))).message).to.match(/rebinding\.example resolves to 169\.254\.169\.254, which is a cloud metadata address/);
    expect((await refusal(checkedAddresses('wiki.internal', 443, [], resolve))).message).to.match(/tools\.web\.allowPrivate \["wiki\.internal:443"\]/);
    expect(await checkedAddresses('wiki.internal', 443, ['wiki.internal:443'], resolve)).to.deep.equal([{ address: '10.1.2.3', family: 4 }]);
    await refusal(checkedAddresses('wiki.internal', 8443, ['wiki.internal:443'], resolve));
    expect((await refusal(checkedAddresses('169.254.169.254', 80, [], resolve))).message).to.match(/169\.254\.169\.254 is a cloud metadata address/);
    expect(await checkedAddresses('fd00::5', 80, ['[fd00::5]:80'], resolve)).to.have.length(1);
    expect((await refusal(checkedAddresses('nothing.example', 80, [], resolve))).message).to.match(/has no address/);
  });
});
