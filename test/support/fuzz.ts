/**
 * Generators of hostile input for the property-based suite: values drawn from a
 * JSON Schema (mostly valid, wrong at any depth now and then), mutations of a
 * valid example, and strings a parser would rather not see.
 */
import fc from 'fast-check';

type Schema = Record<string, any>;

/** Strings that have broken parsers and routers elsewhere. */
export const nastyString = fc.oneof(
  fc.constantFrom(
    '', ' ', '..', '../../etc/passwd', '%2e%2e%2f', '\u0000', '\uFEFF', '\uD800', '𝕏'.repeat(40), 'A'.repeat(5000),
    '__proto__', 'constructor', 'prototype', 'toString', 'NaN', '-1', '1e309', '0x10', 'null', 'true', '[]', '{}',
    '<script>alert(1)</script>', "' OR 1=1 --", '${7*7}', '{{constructor.constructor("x")()}}', '%s%s%n', '\r\nx-injected: 1',
    '2026-12-31T23:59:60Z', '2027-01-01T00:00:00+00', '9999-99-99T99:99:99Z', 'gwt_000000000000000000000000000000000000',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ maxLength: 300 }),
);

/** A JSON value of any shape, including the ones that hurt: deep nesting, huge numbers, special keys. */
export const nastyJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
  { weight: 2, arbitrary: nastyString },
  { weight: 1, arbitrary: fc.constantFrom(1.8e19, -0, Number.MAX_SAFE_INTEGER + 2, 1e308, -1e308, 0.1, 2 ** 53) },
  { weight: 1, arbitrary: fc.integer({ min: 2, max: 200 }).map((depth) => JSON.parse(`${'['.repeat(depth)}${']'.repeat(depth)}`)) },
  // Fresh copies each time: an edit inside one must never reach the next input.
  { weight: 1, arbitrary: fc.constantFrom('{"__proto__":{"polluted":1}}', '{"constructor":{"prototype":{"x":1}}}', '{"__proto__":{"admin":true}}').map((text) => JSON.parse(text)) },
);

/** Values for properties of these names, beside what their schema allows: names the gateway knows, so requests reach past the first check. */
export type Hints = Record<string, fc.Arbitrary<unknown>>;

/**
 * Values for a JSON Schema: valid most of the time, with any node replaced by
 * hostile JSON now and then, required properties sometimes dropped and
 * unknown ones sometimes added.
 */
export function fromSchema(schema: Schema | undefined, components: Record<string, Schema> = {}, hints: Hints = {}, depth = 0): fc.Arbitrary<unknown> {
  const valid = validFor(schema ?? {}, components, hints, depth);
  // Wrong one time in eight at the top, one in twenty-five below: a request with a dozen fields is still often whole.
  return fc.oneof({ weight: depth === 0 ? 7 : 24, arbitrary: valid }, { weight: 1, arbitrary: nastyJson });
}

function validFor(schema: Schema, components: Record<string, Schema>, hints: Hints, depth: number): fc.Arbitrary<unknown> {
  if (typeof schema.$ref === 'string') return validFor(components[schema.$ref.split('/').pop()!] ?? {}, components, hints, depth);
  if (depth > 4) return fc.jsonValue({ maxDepth: 1 });
  if ('const' in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum);
  const alternatives = schema.oneOf ?? schema.anyOf;
  if (Array.isArray(alternatives)) return fc.oneof(...alternatives.map((each: Schema) => validFor(each, components, hints, depth + 1)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string': {
      if (schema.format === 'date-time') return fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }).map((date) => date.toISOString());
      if (typeof schema.pattern === 'string') {
        try {
          return fc.stringMatching(new RegExp(schema.pattern)).filter((value) => value.length <= (schema.maxLength ?? 256));
        } catch {
          // a pattern fast-check cannot generate from: any string
        }
      }
      return fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 40, 200) });
    }
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1_000_000 });
    case 'number':
      return fc.double({ min: schema.minimum ?? -1e6, max: schema.maximum ?? 1e9, noNaN: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.array(fromSchema(schema.items, components, hints, depth + 1), { minLength: Math.min(schema.minItems ?? 0, 3), maxLength: Math.min(schema.maxItems ?? 4, 4) });
    case 'object':
    case undefined: {
      const properties: Record<string, Schema> = schema.properties ?? {};
      if (type === undefined && Object.keys(properties).length === 0) return fc.jsonValue({ maxDepth: 2 });
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, property] of Object.entries(properties)) {
        const own = fromSchema(property, components, hints, depth + 1);
        model[name] = hints[name] ? fc.oneof({ weight: 3, arbitrary: hints[name]! }, { weight: 1, arbitrary: own }) : own;
      }
      const required: string[] = schema.required ?? [];
      const record = fc.record(model, { requiredKeys: [] });
      const withRequired = fc.record(Object.fromEntries(required.filter((name) => model[name]).map((name) => [name, model[name]!])))
        .chain((base) => fc.record(model, { requiredKeys: [] }).map((rest) => ({ ...rest, ...base })));
      return fc.oneof(
        { weight: 4, arbitrary: withRequired },
        { weight: 1, arbitrary: record },
        { weight: 1, arbitrary: fc.tuple(withRequired, fc.dictionary(fc.string({ maxLength: 12 }), nastyJson, { maxKeys: 3 })).map(([base, extra]) => ({ ...extra, ...(base as object) })) },
      );
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** A valid example with one to three of its values replaced by hostile JSON, or removed. */
export function mutated(example: unknown): fc.Arbitrary<unknown> {
  const edit = fc.tuple(fc.nat(), nastyJson, fc.boolean());
  return fc.array(edit, { minLength: 1, maxLength: 3 }).map((edits) => {
    const copy = structuredClone(example);
    for (const [pick, generated, remove] of edits) {
      // A copy: generated values may be shared with other inputs, and a later edit may land inside this one.
      const value = generated === undefined ? undefined : JSON.parse(JSON.stringify(generated) ?? 'null');
      const places = placesIn(copy);
      if (places.length === 0) return value;
      const [parent, key] = places[pick % places.length]!;
      if (remove && !Array.isArray(parent)) delete (parent as Record<string, unknown>)[key];
      else (parent as Record<string, unknown>)[key] = value;
    }
    return copy;
  });
}

function placesIn(value: unknown, found: [object, string][] = []): [object, string][] {
  if (value && typeof value === 'object') {
    for (const key of Object.keys(value)) {
      found.push([value, key]);
      placesIn((value as Record<string, unknown>)[key], found);
    }
  }
  return found;
}

/** Printable ASCII, as a header value must be. */
export const headerValue = fc.oneof(
  fc.string({ unit: 'binary-ascii', maxLength: 80 }).map((text) => text.replace(/[^\x20-\x7e]/g, '')),
  fc.constantFrom('', ' ', 'null', 'Bearer', 'Bearer ', 'Basic Zm9vOmJhcg==', 'A'.repeat(8000)),
);
