/**
 * Private-overlay exposure through Tailscale: with gateway.overlay.mode serve
 * (the tailnet) or funnel (the internet), the daemon, bound to loopback, is
 * published with `tailscale serve|funnel --bg --yes <port>` at start and the
 * publication reset at stop. A missing or logged-out tailscale refuses the
 * start (exit 78) naming the fix. With gateway.auth.allowOverlay, a request
 * that came through `tailscale serve` is the tailnet user `tailscale whois`
 * says its peer address belongs to, never what its headers alone claim.
 */
import { execFile } from 'node:child_process';
import { GatewayError } from '../../shared/errors.ts';
import { isLoopbackAddress } from '../../shared/config/exposure.ts';
import { defineModule } from '../kernel/module.ts';

const TIMEOUT_MS = 10_000;
const WHOIS_CACHE_MS = 60_000;
/** Tailscale's addresses: 100.64.0.0/10 and fd7a:115c:a1e0::/48. */
const TAILNET_ADDRESS = /^(100\.(6[4-9]|[7-9]\d|1[01]\d|12[0-7])\.\d{1,3}\.\d{1,3}|fd7a:115c:a1e0:[0-9a-f:]*)$/i;

interface Outcome { code: number; stdout: string; stderr: string; missing: boolean }

function tailscale(args: string[]): Promise<Outcome> {
  return new Promise((resolve) => {
    execFile('tailscale', args, { timeout: TIMEOUT_MS, encoding: 'utf8' }, (error, stdout, stderr) => {
      const code = error ? (typeof (error as NodeJS.ErrnoException).code === 'number' ? Number((error as NodeJS.ErrnoException).code) : 1) : 0;
      resolve({ code, stdout, stderr, missing: (error as NodeJS.ErrnoException | null)?.code === 'ENOENT' });
    });
  });
}

export interface OverlayState {
  mode: 'serve' | 'funnel';
  /** Where the tailnet (or, with funnel, anyone) reaches the gateway. */
  url: string;
}

export default defineModule({
  id: 'overlay',
  async setup(ctx) {
    const { mode } = ctx.config().gateway.overlay;
    let state: OverlayState | undefined;
    ctx.rpc.method({ name: 'overlay.status', handler: () => ({ overlay: state ?? null }) });
    if (mode === 'off') return;

    const status = await tailscale(['status', '--json']);
    if (status.missing) {
      throw new GatewayError(`gateway.overlay.mode is ${mode}, but the tailscale command is not installed.`, {
        kind: 'invalid_config',
        hints: ['install Tailscale (https://tailscale.com/download/linux), then: sudo tailscale up', 'or turn the overlay off: gateway config set gateway.overlay.mode off'],
      });
    }
    let self: { DNSName?: string } | undefined;
    let backend: string | undefined;
    try {
      const parsed = JSON.parse(status.stdout) as { BackendState?: string; Self?: { DNSName?: string } };
      backend = parsed.BackendState;
      self = parsed.Self;
    } catch {
      backend = undefined;
    }
    if (status.code !== 0 || backend !== 'Running' || !self?.DNSName) {
      throw new GatewayError(`gateway.overlay.mode is ${mode}, but Tailscale is not up (${backend ?? (status.stderr.trim() || `exit ${status.code}`)}).`, {
        kind: 'invalid_config',
        hints: ['sudo tailscale up   # log this host in to the tailnet', 'or turn the overlay off: gateway config set gateway.overlay.mode off'],
      });
    }
    const port = ctx.daemon.port;
    const published = await tailscale([mode, '--bg', '--yes', String(port)]);
    if (published.code !== 0) {
      throw new GatewayError(`tailscale ${mode} --bg --yes ${port} failed: ${(published.stderr || published.stdout).trim() || `exit ${published.code}`}.`, {
        kind: 'invalid_config',
        hints: mode === 'funnel' ? ['funnel needs HTTPS certificates and the funnel attribute in the tailnet policy: https://tailscale.com/kb/1223/funnel'] : ['sudo tailscale set --operator=$USER   # lets this user change serve settings'],
      });
    }
    state = { mode, url: `https://${self.DNSName.replace(/\.$/, '')}/` };
    ctx.log.info({ mode, url: state.url, port }, 'published on the overlay');
    ctx.onStop(async () => {
      const reset = await tailscale([mode, 'reset']);
      if (reset.code !== 0) ctx.log.warn({ mode, error: (reset.stderr || reset.stdout).trim() }, 'the overlay publication could not be reset');
    });

    // Requests that came through `tailscale serve`: from loopback, with the peer's tailnet address forwarded.
    const whois = new Map<string, { login: string | undefined; until: number }>();
    ctx.http.overlayIdentity(async (req) => {
      if (!isLoopbackAddress(req.socket.remoteAddress ?? '')) return undefined;
      const claimed = req.headers['tailscale-user-login'];
      const forwarded = String(req.headers['x-forwarded-for'] ?? '').split(',').at(-1)!.trim();
      if (typeof claimed !== 'string' || !TAILNET_ADDRESS.test(forwarded)) return undefined;
      let known = whois.get(forwarded);
      if (!known || known.until < Date.now()) {
        const answer = await tailscale(['whois', '--json', forwarded]);
        let login: string | undefined;
        try {
          login = (JSON.parse(answer.stdout) as { UserProfile?: { LoginName?: string } }).UserProfile?.LoginName;
        } catch {
          login = undefined;
        }
        known = { login: answer.code === 0 ? login : undefined, until: Date.now() + WHOIS_CACHE_MS };
        if (whois.size > 1000) whois.clear();
        whois.set(forwarded, known);
      }
      return known.login !== undefined && known.login === claimed ? `overlay:${known.login}` : undefined;
    });
  },
});
