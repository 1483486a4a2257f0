import { createRequire } from 'node:module';

/** The export name of a method's params validator in validators.generated.cjs (method names hold dots). */
export const validatorExport = (method: string): string => `m_${method.replace(/[^A-Za-z0-9]/g, '_')}`;

/** The build-time validators (scripts/build-validators.ts), from beside this file: in src/, dist/ and the bundled daemon alike. */
export const loadProtocolValidators = (): unknown => createRequire(import.meta.url)('./validators.generated.cjs');
