/** What a daemon started by `gateway start` tells its parent over IPC, once, before the channel closes. */
export type DaemonMessage =
  | { type: 'ready'; pid: number; port: number; host: string; url: string; secretStore: string }
  | { type: 'running'; pid: number; port: number }
  | { type: 'error'; message: string; hints: string[]; exitCode: number };

export const isDaemonMessage = (value: unknown): value is DaemonMessage =>
  typeof value === 'object' && value !== null && ['ready', 'running', 'error'].includes((value as { type?: string }).type ?? '');
