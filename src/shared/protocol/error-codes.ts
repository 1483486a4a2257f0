/**
 * The closed set of RPC error codes. Each has one meaning and one next step;
 * clients branch on the code, people read the message.
 */
export const ErrorCodes = {
  INVALID_REQUEST: 'the frame or its params are malformed; fix the request',
  UNAUTHORIZED: 'the credential is missing or wrong; pass the right token or password',
  FORBIDDEN: 'the connection lacks the scope the method needs; connect with that scope',
  PAIRING_REQUIRED: 'this device is not paired yet; approve it on the gateway host',
  NOT_FOUND: 'the method or the object it names does not exist',
  UNAVAILABLE: 'the gateway cannot serve this now (starting or stopping); retry shortly',
  RATE_LIMITED: 'too many attempts; wait retryAfterMs before trying again',
  INTERNAL: 'an unexpected failure in the gateway; see its log',
} as const;

export type ErrorCode = keyof typeof ErrorCodes;

export const isErrorCode = (value: unknown): value is ErrorCode =>
  typeof value === 'string' && Object.hasOwn(ErrorCodes, value);
