/** Exit codes of every `gateway` command; scripts depend on them, so they never change meaning. */
export const ExitCode = {
  ok: 0,
  failure: 1,
  usage: 2,
  notRunning: 3,
  stale: 4,
  notFound: 5,
  invalidConfig: 78,
} as const;

export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];
