/** The export name of a method's params validator in validators.generated.cjs (method names hold dots). */
export const validatorExport = (method: string): string => `m_${method.replace(/[^A-Za-z0-9]/g, '_')}`;
