/** The hooks ingress in /openapi.json: POST <hooks.path>/<name> and what it answers. */
import { errorResponse, jsonResponse, type ApiDocumentPart } from '../kernel/api-doc.ts';

/** The ingress's description, under its base path (hooks.path, fixed at start). */
export function hooksDocument(base: string): ApiDocumentPart {
  return {
  schemas: {
    HookResult: {
      type: 'object', required: ['ok', 'hook', 'results'], additionalProperties: false,
      properties: {
        ok: { const: true }, hook: { type: 'string' },
        results: {
          type: 'array',
          items: {
            type: 'object', required: ['action'],
            properties: {
              action: { enum: ['job', 'message', 'wake', 'automation'] }, kind: { type: 'string' }, jobId: { type: 'string' }, automation: { type: 'string' },
              sessionKey: { type: 'string' }, messageId: { type: 'string' },
            },
          },
        },
      },
    },
  },
  paths: {
    [`${base}/{name}`]: {
      post: {
        summary: 'run the mappings named name (hooks.enabled), with the hooks token of its own',
        security: [{ hooksToken: [] }],
        parameters: [
          { name: 'name', in: 'path', required: true, schema: { type: 'string' } },
          { name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', maxLength: 128 }, description: 'a repeat answers as the first did, with Idempotent-Replayed: true' },
        ],
        requestBody: { required: false, content: { 'application/json': { schema: { type: 'object' } } } },
        responses: {
          200: jsonResponse('HookResult', 'what each matching mapping did'),
          204: { description: 'no mapping matched the payload; nothing was done' },
          400: errorResponse('not a JSON object, a bad Idempotency-Key or session key, the token in the URL'),
          401: errorResponse('missing or wrong hooks token'),
          404: errorResponse('no hook of that name, or hooks are off'),
          413: errorResponse('over hooks.maxBodyBytes'),
          415: errorResponse('not application/json'),
          429: errorResponse('too many requests or failed attempts; see Retry-After'),
          503: errorResponse('no hooks token is set, the jobs of the mapping have no handler, or the channel could not deliver the message'),
        },
      },
    },
  },
};
}
