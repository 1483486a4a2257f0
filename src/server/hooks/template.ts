/** A value at a dotted path of a payload (a.b.0.c); undefined when any step is missing. Own properties only. */
export function valueAt(payload: unknown, path: string): unknown {
  let node: unknown = payload;
  for (const part of path.split('.')) {
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, part)) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

const FIELD_REFERENCE = /\{\{\s*([A-Za-z0-9_$-]+(?:\.[A-Za-z0-9_$-]+)*)\s*\}\}/g;
const MAX_TEXT = 4000;

/**
 * Fills {{path.to.field}} references from a payload. Nothing is evaluated:
 * a reference is a path, its value is text (objects as JSON, missing as
 * empty), and the result is cut at 4000 characters.
 */
export function renderTemplate(template: string, payload: unknown): string {
  const text = template.replace(FIELD_REFERENCE, (_match, path: string) => {
    const value = valueAt(payload, path);
    if (value === undefined || value === null) return '';
    return typeof value === 'object' ? JSON.stringify(value) : String(value);
  });
  return text.length > MAX_TEXT ? text.slice(0, MAX_TEXT) : text;
}
