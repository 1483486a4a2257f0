// The PostgreSQL URL of a profile's shared store, as it may be shown and checked.

/** Whether a connection URL carries its own password. */
export function hasPassword(url: string): boolean {
  try {
    const parsed = new URL(url);
    return parsed.password !== '' || parsed.searchParams.has('password');
  } catch {
    return false;
  }
}

/** The URL as it may be shown: never its password. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    if (parsed.searchParams.has('password')) parsed.searchParams.set('password', '***');
    return parsed.toString();
  } catch {
    return 'an unreadable URL';
  }
}

/**
 * How a daemon appears in PostgreSQL's list of sessions: `gateway store
 * status` reads the daemons attached from it. The instance id comes first:
 * PostgreSQL keeps 63 bytes, and a long profile name is what is cut.
 */
export const daemonApplicationName = (profile: string, instanceId: string): string => `gateway ${instanceId} ${profile}`.slice(0, 63);

/** The instance id and profile in a daemon's application name (see daemonApplicationName). */
export function daemonOfApplicationName(name: string): { profile: string; instanceId: string } {
  const [, instanceId = '', ...profile] = name.split(' ');
  return { instanceId, profile: profile.join(' ') };
}

/**
 * The URL to connect with: the password from the secret store put in (pg
 * lets a connection string's fields win over separate ones). Held in memory
 * only, never shown.
 */
export function withPassword(url: string, password: string | undefined): string {
  if (password === undefined || hasPassword(url)) return url;
  const parsed = new URL(url);
  parsed.password = encodeURIComponent(password);
  return parsed.toString();
}
