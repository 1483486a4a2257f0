import { Flags } from '@oclif/core';
import { BaseCommand } from '../cli/base-command.ts';
import { usageError } from '../shared/errors.ts';

export interface DiscoveredGateway {
  /** The instance name it announces. */
  name: string;
  host: string;
  addresses: string[];
  port: number;
  profile: string | null;
  version: string | null;
  /** What a client needs: token, password, trusted-proxy or none. */
  auth: string | null;
  tls: boolean;
}

const SERVICE = '_gateway._tcp.local';

/** 3s, 500ms or a number of milliseconds. */
function parseTimeout(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s)?$/.exec(text.trim());
  if (!match) throw usageError(`--timeout must be a duration such as 3s or 500ms (got ${JSON.stringify(text)}).`);
  const value = Number(match[1]) * (match[2] === 'ms' ? 1 : match[2] === 's' ? 1000 : 1);
  if (value < 100 || value > 60_000) throw usageError('--timeout must be between 100ms and 60s.');
  return value;
}

export default class Discover extends BaseCommand<{ gateways: DiscoveredGateway[] }> {
  static override summary = 'List the gateways that announce themselves on the local network (multicast DNS).';
  static override description = 'Asks for _gateway._tcp and lists each gateway that answers within the timeout: its name, addresses, port, profile, version and the authentication it needs. '
    + 'Gateways announce themselves when their bind reaches beyond loopback (gateway.discovery.mdns.enabled).';
  static override examples = ['<%= config.bin %> discover', '<%= config.bin %> discover --timeout 5s --json'];
  static override flags = {
    timeout: Flags.string({ description: 'how long to listen for answers', default: '3s' }),
  };

  async run(): Promise<{ gateways: DiscoveredGateway[] }> {
    const { flags } = await this.parse(Discover);
    const timeoutMs = parseTimeout(flags.timeout);
    const { default: multicastDns } = await import('multicast-dns');
    const gateways = await new Promise<DiscoveredGateway[]>((resolve, reject) => {
      const mdns = multicastDns();
      const instances = new Set<string>();
      const srv = new Map<string, { target: string; port: number }>();
      const txt = new Map<string, Record<string, string>>();
      const addresses = new Map<string, Set<string>>();
      mdns.on('error', (error: Error) => {
        mdns.destroy();
        reject(error);
      });
      mdns.on('response', (packet) => {
        for (const record of [...packet.answers, ...(packet.additionals ?? [])]) {
          if (record.type === 'PTR' && record.name === SERVICE) instances.add(String(record.data));
          else if (record.type === 'SRV') srv.set(record.name, { target: record.data.target, port: record.data.port });
          else if (record.type === 'TXT') {
            const fields: Record<string, string> = {};
            for (const entry of ([] as unknown[]).concat(record.data)) {
              const text = Buffer.isBuffer(entry) ? entry.toString('utf8') : String(entry);
              const at = text.indexOf('=');
              if (at > 0) fields[text.slice(0, at)] = text.slice(at + 1);
            }
            txt.set(record.name, fields);
          } else if (record.type === 'A' || record.type === 'AAAA') {
            const set = addresses.get(record.name) ?? new Set<string>();
            set.add(String(record.data));
            addresses.set(record.name, set);
          }
        }
      });
      const ask = () => mdns.query({ questions: [{ name: SERVICE, type: 'PTR' }] });
      ask();
      // Asked again halfway: a first query can be lost while the socket joins the group.
      const again = setTimeout(ask, Math.min(1000, timeoutMs / 2));
      setTimeout(() => {
        clearTimeout(again);
        mdns.destroy();
        resolve([...instances].sort().map((instance) => {
          const service = srv.get(instance);
          const fields = txt.get(instance) ?? {};
          return {
            name: instance.endsWith(`.${SERVICE}`) ? instance.slice(0, -SERVICE.length - 1) : instance,
            host: service?.target ?? '',
            addresses: [...(service ? addresses.get(service.target) ?? [] : [])].sort(),
            port: service?.port ?? Number(fields.port ?? 0),
            profile: fields.profile ?? null,
            version: fields.version ?? null,
            auth: fields.auth ?? null,
            tls: fields.tls === 'yes',
          };
        }));
      }, timeoutMs);
    });
    if (gateways.length === 0) this.say(`No gateway answered within ${flags.timeout}.`);
    for (const gateway of gateways) {
      this.say(`${gateway.name}  ${gateway.addresses[0] ?? gateway.host}:${gateway.port}  profile ${gateway.profile ?? '?'}  version ${gateway.version ?? '?'}  auth ${gateway.auth ?? '?'}`);
    }
    return { gateways };
  }
}
