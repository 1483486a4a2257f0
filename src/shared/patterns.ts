/** A name pattern of an allow or deny list: the name itself, or a prefix ending in *. */
export const matchesPattern = (pattern: string, name: string): boolean =>
  pattern === name || pattern === '*' || (pattern.endsWith('*') && name.startsWith(pattern.slice(0, -1)));
