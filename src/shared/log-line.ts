/** Log lines for people: one pino JSON line as time, level, message and fields. */
/** pino's level numbers, by name. */
export const LOG_LEVEL_VALUES: Readonly<Record<string, number>> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };
/** The name of a level number. */
export const LOG_LEVEL_NAMES: Readonly<Record<number, string>> = Object.fromEntries(Object.entries(LOG_LEVEL_VALUES).map(([name, value]) => [value, name]));
const OMIT = new Set(['level', 'time', 'msg', 'pid', 'profile', 'hostname', 'v']);

/** Renders one pino JSON line for a person; other lines pass through unchanged. */
export function renderLogLine(line: string, color = false): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  if (typeof entry !== 'object' || entry === null || !('msg' in entry || 'level' in entry)) return line;
  const time = typeof entry.time === 'string' ? entry.time.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : String(entry.time ?? '');
  const level = LOG_LEVEL_NAMES[entry.level as number]?.toUpperCase() ?? String(entry.level ?? '');
  const fields = Object.entries(entry)
    .filter(([key]) => !OMIT.has(key))
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join(' ');
  const paint = (code: number, text: string) => (color ? `\u001B[${code}m${text}\u001B[0m` : text);
  const levelText = level.padEnd(5);
  const painted = level === 'ERROR' || level === 'FATAL' ? paint(31, levelText) : level === 'WARN' ? paint(33, levelText) : level === 'DEBUG' || level === 'TRACE' ? paint(90, levelText) : levelText;
  return `${time} ${painted} ${String(entry.msg ?? '')}${fields ? ` ${paint(90, fields)}` : ''}`;
}

/** The daemon's warning when webhook deliveries arrive without a secret set (gateway doctor looks for it). */
export const NO_WEBHOOK_SECRET_LOG = 'webhook deliveries arrive but no webhook secret is configured; each is refused with 503';
