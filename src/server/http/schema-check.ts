import AjvModule, { type ErrorObject, type ValidateFunction } from 'ajv';
import formatsModule from 'ajv-formats';
import { schemas, type SchemaName } from '../../shared/api/schemas.ts';

const Ajv = AjvModule.default;
const addFormats = formatsModule.default;

let ajv: InstanceType<typeof Ajv> | undefined;
const compiled = new Map<SchemaName, ValidateFunction>();

/** The validator of one API schema, compiled on first use with every schema available to its $refs. */
export function validatorOf(name: SchemaName): ValidateFunction {
  let validate = compiled.get(name);
  if (!validate) {
    if (!ajv) {
      ajv = new Ajv({ allErrors: true, strict: false, verbose: true });
      addFormats(ajv);
      for (const [key, schema] of Object.entries(schemas)) ajv.addSchema(schema, `#/components/schemas/${key}`);
    }
    validate = ajv.getSchema(`#/components/schemas/${name}`)!;
    compiled.set(name, validate);
  }
  return validate;
}

/** The problems of a value against an API schema, each naming its field; empty when it conforms. */
export function schemaProblems(name: SchemaName, value: unknown, describe: (error: ErrorObject) => string | undefined = () => undefined): string[] {
  const validate = validatorOf(name);
  if (validate(value)) return [];
  const lines = (validate.errors ?? []).map((error) => describe(error) ?? `${error.instancePath.slice(1).replace(/\//g, '.') || 'body'} ${error.message ?? 'is invalid'}`);
  return [...new Set(lines)];
}
