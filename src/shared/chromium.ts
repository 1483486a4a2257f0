/**
 * Where the host's Chromium is, for the browser tools and `gateway doctor`:
 * tools.browser.executablePath when set, else the first of Debian's and
 * Ubuntu's places. The browser binary itself comes first: Debian's
 * /usr/bin/chromium is a shell script that reads /etc/chromium.d, which the
 * browser's sandbox does not show.
 */
import { accessSync, constants, realpathSync } from 'node:fs';

export const CHROMIUM_PLACES = ['/usr/lib/chromium/chromium', '/usr/bin/chromium', '/usr/bin/chromium-browser'] as const;

const runnable = (path: string): boolean => {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** The Chromium to run (its real path), or what is missing and how to get it. */
export function findChromium(configured?: string): { path: string } | { missing: string } {
  if (configured) {
    return runnable(configured)
      ? { path: realpathSync(configured) }
      : { missing: `tools.browser.executablePath (${configured}) is not a program this daemon can run: gateway config unset tools.browser.executablePath, or name the Chromium to run` };
  }
  const found = CHROMIUM_PLACES.find(runnable);
  return found ? { path: realpathSync(found) } : { missing: 'Chromium is not installed: sudo apt-get install chromium (or set tools.browser.executablePath)' };
}
