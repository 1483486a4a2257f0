import type { ErrorObject } from 'ajv';

/** The standalone validator of config.json, generated from schema.ts at build time. */
declare const validate: ((data: unknown) => boolean) & { errors?: ErrorObject[] | null };
export = validate;
