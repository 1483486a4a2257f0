/** What a user may have meant by a command, a flag or a name that does not exist. */

/** Edit distance with transpositions: "stauts" is one step from "status". */
function distance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) rows[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = best;
    }
  }
  return rows[a.length]![b.length]!;
}

/** The commands closest to what was typed, best first: close in spelling, or starting with it. */
export function suggestions(typed: string, commands: readonly string[]): string[] {
  const scored = commands
    .map((command) => {
      const score = command.startsWith(typed) ? 0.5 : distance(typed, command);
      return { command, score };
    })
    .filter(({ score }) => score <= Math.max(1, Math.min(3, Math.floor(typed.length / 3))))
    .sort((a, b) => a.score - b.score || a.command.localeCompare(b.command));
  return scored.slice(0, 3).map(({ command }) => command);
}
