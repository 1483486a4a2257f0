/** Errors of the inference API in the convention its clients parse: {"error": {message, type, code, param}}. */
import { DomainError } from '../kernel/errors.ts';

const TYPES: Partial<Record<DomainError['kind'], string>> = {
  invalid: 'invalid_request_error',
  method_not_allowed: 'invalid_request_error',
  not_found: 'invalid_request_error',
  too_large: 'invalid_request_error',
  insufficient_storage: 'invalid_request_error',
  unsupported_media_type: 'invalid_request_error',
  conflict: 'invalid_request_error',
  invalid_config: 'invalid_request_error',
  unauthorized: 'authentication_error',
  forbidden: 'permission_error',
  pairing_required: 'permission_error',
  rate_limited: 'rate_limit_error',
  upstream: 'api_error',
  unavailable: 'api_error',
  internal: 'server_error',
};

export interface InferenceErrorBody {
  error: { message: string; type: string; code: string | null; param: string | null };
}

export function inferenceErrorBody(error: DomainError): InferenceErrorBody {
  return {
    error: {
      message: error.message,
      type: TYPES[error.kind] ?? 'api_error',
      code: error.reason !== undefined && error.reason !== error.kind ? error.reason : null,
      param: typeof error.details?.param === 'string' ? error.details.param : null,
    },
  };
}

/** A request the inference API refuses, naming the field. */
export const badField = (param: string, message: string, code = 'invalid_value') => new DomainError('invalid', message, { code, details: { param } });
