export interface Step<C> {
  title: string;
  run: (context: C) => Promise<void> | void;
}

/**
 * Runs steps with listr2 progress on a terminal, plain lines on stderr
 * otherwise, and silently under --json.
 */
export async function runSteps<C extends object>(steps: Step<C>[], context: C, options: { json: boolean }): Promise<C> {
  const interactive = Boolean(process.stderr.isTTY && process.stdout.isTTY) && !options.json;
  if (!interactive) {
    for (const step of steps) {
      if (!options.json) process.stderr.write(`${step.title}...\n`);
      await step.run(context);
    }
    return context;
  }
  const { Listr } = await import('listr2');
  const list = new Listr<C>(
    steps.map((step) => ({ title: step.title, task: (ctx: C) => step.run(ctx) })),
    { concurrent: false, exitOnError: true, rendererOptions: { collapseErrors: true, showErrorMessage: false } },
  );
  return list.run(context);
}
