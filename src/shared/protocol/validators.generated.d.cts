import type { ErrorObject } from 'ajv';

type Validate = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null };

/** Standalone validators of `connect` params and of each method's params, generated at build time. */
declare const validators: Record<string, Validate | undefined> & { connect: Validate };
export = validators;
