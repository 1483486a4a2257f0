/**
 * WhatsApp's customer service window: a business may send a person a
 * free-form message (text, media, a reaction) only within 24 hours of the
 * last message that person sent it; after that, only an approved template.
 * Each account remembers when it last heard from each person, and when it
 * last invited one back with its template, in the profile's database (the
 * account's cursor), so a reply after a restart knows where it stands.
 */

export const WINDOW_MS = 24 * 60 * 60_000;
/** People remembered at most per account (those heard from longest ago are forgotten first: their window is shut anyway). */
const MAX_REMEMBERED = 20_000;

export class ServiceWindows {
  /** When each person last wrote, in the order heard (oldest first). */
  private readonly heardAt = new Map<string, number>();
  /** When each person was last sent the template inviting them back. */
  private readonly invitedAt = new Map<string, number>();

  /** What a cursor saved; anything unreadable starts afresh (every window shut: the safe side). */
  static fromCursor(cursor: string | undefined): ServiceWindows {
    const windows = new ServiceWindows();
    try {
      const saved = cursor ? JSON.parse(cursor) as { heard?: Record<string, unknown>; invited?: Record<string, unknown> } : {};
      const entries = (record: Record<string, unknown> | undefined) => Object.entries(record ?? {})
        .filter((entry): entry is [string, number] => typeof entry[1] === 'number' && Number.isFinite(entry[1])).sort((a, b) => a[1] - b[1]);
      for (const [who, at] of entries(saved.heard)) windows.heardAt.set(who, at);
      for (const [who, at] of entries(saved.invited)) windows.invitedAt.set(who, at);
    } catch {
      // A cursor of another shape: nothing is known.
    }
    return windows;
  }

  /** What to save: what still matters (the last 24 hours). */
  toCursor(now: number): string {
    const recent = (map: Map<string, number>) => Object.fromEntries([...map].filter(([, at]) => now - at < WINDOW_MS));
    return JSON.stringify({ heard: recent(this.heardAt), invited: recent(this.invitedAt) });
  }

  /** A person wrote at `at`; true when that moves their window on. */
  heard(who: string, at: number): boolean {
    const known = this.heardAt.get(who);
    if (known !== undefined && known >= at) return false;
    this.heardAt.delete(who);
    this.heardAt.set(who, at);
    this.invitedAt.delete(who);
    if (this.heardAt.size > MAX_REMEMBERED) this.heardAt.delete(this.heardAt.keys().next().value!);
    return true;
  }

  lastHeard(who: string): number | undefined {
    return this.heardAt.get(who);
  }

  isOpen(who: string, now: number): boolean {
    const at = this.heardAt.get(who);
    return at !== undefined && now - at < WINDOW_MS;
  }

  /** Meta said the window is shut (error 131047): what was remembered was wrong. */
  shut(who: string): void {
    this.heardAt.delete(who);
  }

  /** When the person was invited back with the template, within the last 24 hours (after they last wrote). */
  invited(who: string, now: number): number | undefined {
    const at = this.invitedAt.get(who);
    return at !== undefined && now - at < WINDOW_MS ? at : undefined;
  }

  invite(who: string, at: number): void {
    this.invitedAt.delete(who);
    this.invitedAt.set(who, at);
    if (this.invitedAt.size > MAX_REMEMBERED) this.invitedAt.delete(this.invitedAt.keys().next().value!);
  }
}
