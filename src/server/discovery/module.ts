/**
 * Local discovery: a daemon whose bind reaches beyond loopback announces
 * `_gateway._tcp` over multicast DNS (gateway.discovery.mdns.enabled, on by default
 * for those binds, never on loopback). The instance name comes from the host
 * and the profile; the TXT record says the version, port, profile and what a
 * client needs (auth, TLS), never a secret. @homebridge/ciao probes the name
 * and renames it on a conflict (RFC 6762), and the renamed name is kept for the
 * next start; stopping sends the goodbye. ciao loads only when announcing.
 */
import { readFileSync } from 'node:fs';
import { writeFileAtomic } from '../../shared/atomic-file.ts';
import { hostname, networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { defineModule } from '../kernel/module.ts';

export const SERVICE_TYPE = 'gateway';

export default defineModule({
  id: 'discovery',
  setup(ctx) {
    const { bind } = ctx.daemon;
    const wanted = ctx.config().gateway.discovery.mdns.enabled;
    let announced: string | undefined;
    ctx.rpc.method({ name: 'discovery.status', handler: () => ({ name: announced ?? null }) });
    if (bind.loopback || wanted === false) {
      if (bind.loopback && wanted === true) ctx.log.info('gateway.discovery.mdns.enabled is ignored on a loopback bind: nothing outside this host could reach the gateway');
      return;
    }

    // The name this profile announced last, renamed after a conflict, else host and profile.
    const nameFile = join(ctx.daemon.paths.dir, 'mdns.json');
    let name = `${hostname().split('.')[0]} gateway ${ctx.daemon.profile}`;
    try {
      const saved = (JSON.parse(readFileSync(nameFile, 'utf8')) as { name?: unknown }).name;
      if (typeof saved === 'string' && saved.length > 0 && saved.length <= 63) name = saved;
    } catch {
      // never renamed
    }
    const keep = (renamed: string) => writeFileAtomic(nameFile, `${JSON.stringify({ name: renamed })}\n`);

    let responder: { shutdown(): Promise<void> } | undefined;
    ctx.onStart(async () => {
      const { getResponder } = (await import('@homebridge/ciao')).default;
      const config = ctx.config();
      // A daemon bound to one address announces on that address's interface only; one bound to all, on every
      // interface with an address (named here: ciao's own lookup misreads names such as eth0@if5 of veth and containers).
      const all = bind.host === '0.0.0.0' || bind.host === '::';
      const interfaces = all
        ? Object.entries(networkInterfaces()).filter(([, infos]) => infos?.some((info) => !info.internal)).map(([interfaceName]) => interfaceName)
        : [bind.host];
      if (interfaces.length === 0) {
        ctx.log.info('no network interface to announce on (mDNS)');
        return;
      }
      const instance = getResponder({ interface: interfaces });
      responder = instance;
      const service = instance.createService({
        name,
        type: SERVICE_TYPE,
        port: ctx.daemon.port,
        txt: { version: ctx.daemon.version, port: String(ctx.daemon.port), profile: ctx.daemon.profile, auth: config.gateway.auth.mode, tls: 'no' },
      });
      service.on('name-change', (renamed: string) => {
        ctx.log.warn({ from: name, to: renamed }, 'another host announces the same name on the network; this gateway is announced as the new name from now on');
        name = renamed;
        announced = renamed;
        keep(renamed);
      });
      // Probing takes a few seconds: the daemon is ready meanwhile.
      service.advertise().then(
        () => {
          announced = service.getFQDN ? service.getFQDN() : name;
          ctx.log.info({ name: announced }, 'announced on the local network (mDNS)');
        },
        (error: unknown) => ctx.log.warn({ error: (error as Error).message }, 'could not announce on the local network (mDNS)'),
      );
    });
    ctx.onStop(async () => {
      // The goodbye: hosts that saw the announcement forget it now rather than when it expires.
      await Promise.race([responder?.shutdown(), new Promise((resolve) => setTimeout(resolve, 2000))]);
    });
  },
});
