import { expect } from 'chai';
import { addressProblem, AddressRefused, checkedAddresses, type Resolver } from '../../../src/server/toolbox/address-guard.ts';

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
