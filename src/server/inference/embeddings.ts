/** POST /v1/embeddings as the OpenAI API has it: the request checked field by field, the vectors as floats or base64. */
import { badField } from './errors.ts';

export interface EmbeddingsRequest {
  model: string;
  values: string[];
  encoding: 'float' | 'base64' | undefined;
}

/** The request, or a 400 naming the field that is wrong. */
export function parseEmbeddingsRequest(request: unknown): EmbeddingsRequest {
  if (!request || typeof request !== 'object' || Array.isArray(request)) throw badField('body', 'The body must be a JSON object {model, input}.');
  const { model, input, encoding_format: encoding, dimensions, user, ...rest } = request as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw badField(unknown[0]!, `Unsupported field: ${unknown.join(', ')}.`, 'unsupported_parameter');
  if (typeof model !== 'string' || !model) throw badField('model', 'model is required: an embedding model GET /v1/models lists.');
  if (dimensions !== undefined) throw badField('dimensions', 'dimensions are not supported: the model decides.', 'unsupported_parameter');
  if (encoding !== undefined && encoding !== 'float' && encoding !== 'base64') throw badField('encoding_format', 'encoding_format must be float or base64.');
  if (user !== undefined && typeof user !== 'string') throw badField('user', 'user must be a string.');
  const values = typeof input === 'string' ? [input] : input;
  if (!Array.isArray(values) || values.length === 0 || values.length > 2048 || !values.every((value) => typeof value === 'string' && value.length > 0)) {
    throw badField('input', 'input must be a non-empty string or an array of at most 2048 non-empty strings.');
  }
  return { model, values: values as string[], encoding };
}

/** The answer: each vector as floats, or as the base64 of its little-endian float32s. */
export function embeddingsAnswer(result: { embeddings: number[][]; tokens?: number }, model: string, encoding: EmbeddingsRequest['encoding']) {
  return {
    object: 'list',
    data: result.embeddings.map((vector, index) => ({
      object: 'embedding', index, embedding: encoding === 'base64' ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector,
    })),
    model,
    usage: result.tokens === undefined ? undefined : { prompt_tokens: result.tokens, total_tokens: result.tokens },
  };
}
