/**
 * JSON Schema checks at run time (tool arguments, module-declared params, API
 * bodies), with ajv loaded on first need: a daemon that never checks one
 * never pays for it.
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import { schemas, type SchemaName } from '../../shared/api/schemas.ts';

type Compiler = { compile: (schema: object) => ValidateFunction; getSchema: (ref: string) => ValidateFunction | undefined };
let compiler: Compiler | undefined;
let loading: Promise<void> | undefined;
const compiled = new WeakMap<object, ValidateFunction>();

/** Loads the schema compiler; call (and await) before compileSchema. */
export function loadSchemaCompiler(): Promise<void> {
  loading ??= Promise.all([import('ajv'), import('ajv-formats')]).then(([ajvModule, formatsModule]) => {
    const instance = new ajvModule.default.default({ allErrors: true, strict: false, verbose: true });
    formatsModule.default.default(instance);
    // A date-time the gateway accepts is one it can read: RFC 3339 allows forms (a leap second, "+00" offsets)
    // that Date.parse cannot, and a value the schema passes must never fail after it.
    const rfc3339 = formatsModule.default.default.get('date-time') as { validate: (value: string) => boolean } | ((value: string) => boolean);
    const wellFormed = typeof rfc3339 === 'function' ? rfc3339 : rfc3339.validate;
    instance.addFormat('date-time', { type: 'string', validate: (value: string) => wellFormed(value) && !Number.isNaN(Date.parse(value)) });
    for (const [key, schema] of Object.entries(schemas)) instance.addSchema(schema, `#/components/schemas/${key}`);
    compiler = instance;
  });
  return loading;
}

/** Compiles (once per schema object) a JSON Schema; throws when it is not a valid one. Needs loadSchemaCompiler() first. */
export function compileSchema(schema: Record<string, unknown>): ValidateFunction {
  let validate = compiled.get(schema);
  if (!validate) {
    if (!compiler) throw new Error('the schema compiler is not loaded');
    validate = compiler.compile(schema);
    compiled.set(schema, validate);
  }
  return validate;
}

/** The problems ajv found, each naming its field ("args.text must be string"). */
export function describeProblems(errors: readonly ErrorObject[] | null | undefined, root: string, describe: (error: ErrorObject) => string | undefined = () => undefined): string[] {
  const lines = (errors ?? []).map((error) => describe(error) ?? `${error.instancePath.slice(1).replace(/\//g, '.') || root} ${error.message ?? 'is invalid'}`);
  return [...new Set(lines)];
}

/** The problems of a value against one of the API's schemas; empty when it conforms. Needs loadSchemaCompiler() first. */
export function apiSchemaProblems(name: SchemaName, value: unknown, describe?: (error: ErrorObject) => string | undefined): string[] {
  if (!compiler) throw new Error('the schema compiler is not loaded');
  const validate = compiler.getSchema(`#/components/schemas/${name}`)!;
  return validate(value) ? [] : describeProblems(validate.errors, 'body', describe);
}
