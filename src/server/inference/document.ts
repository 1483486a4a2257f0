/** The inference API in /openapi.json: its paths, and the shapes its answers and errors take. */
import type { ApiDocumentPart } from '../kernel/api-doc.ts';
import { jsonResponse, security } from '../kernel/api-doc.ts';

const error = (description: string) => jsonResponse('InferenceError', description);
const errors = {
  400: error('a malformed request, or a field the gateway does not support (named in param)'),
  401: error('missing or wrong credential'),
  403: error('the credential lacks the inference scope, or the agent does not allow the model'),
  404: error('unknown model or agent (model_not_found), unknown response, or the endpoint is off'),
  405: error('another method'),
  413: error('body over inference.maxBodyBytes'),
  415: error('not JSON'),
  429: error('over the credential\'s limits (requests or tokens a minute, the monthly budget); see Retry-After'),
  500: error('an unexpected failure'),
  502: error('the model provider failed, or did not answer in time (named in the message)'),
  503: error('the gateway is stopping, or the run was aborted'),
};
/** A GET has no body to be too large or of the wrong type. */
const { 413: _tooLarge, 415: _notJson, ...readErrors } = errors;
const usage = { type: 'object', required: ['prompt_tokens', 'completion_tokens', 'total_tokens'], properties: { prompt_tokens: { type: 'integer' }, completion_tokens: { type: 'integer' }, total_tokens: { type: 'integer' } } };
const body = (schema: string) => ({ required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/${schema}` } } } });
const stream = (description: string) => ({ description, content: { 'text/event-stream': { schema: { type: 'string' } } } });

export function inferenceDocument(): ApiDocumentPart {
  return {
    schemas: {
      InferenceError: {
        type: 'object', required: ['error'], additionalProperties: false,
        properties: {
          error: {
            type: 'object', required: ['message', 'type', 'code', 'param'], additionalProperties: false,
            properties: { message: { type: 'string' }, type: { type: 'string' }, code: { type: ['string', 'null'] }, param: { type: ['string', 'null'] } },
          },
        },
      },
      ChatCompletionRequest: {
        type: 'object', required: ['model', 'messages'],
        properties: {
          model: { type: 'string', description: 'gateway (the default agent), gateway/<agent>, or a provider model GET /v1/models lists' },
          messages: { type: 'array', minItems: 1, items: { type: 'object', required: ['role'] } },
          stream: { type: 'boolean' }, stream_options: { type: 'object', properties: { include_usage: { type: 'boolean' } } },
          temperature: { type: 'number', minimum: 0, maximum: 2 }, max_tokens: { type: 'integer', minimum: 1 }, max_completion_tokens: { type: 'integer', minimum: 1 },
          tools: { type: 'array' }, tool_choice: {}, user: { type: 'string', description: 'keeps the exchange in one session (also the x-gateway-session header)' },
          n: { const: 1 },
        },
      },
      ChatCompletion: {
        type: 'object', required: ['id', 'object', 'created', 'model', 'choices'],
        properties: {
          id: { type: 'string' }, object: { const: 'chat.completion' }, created: { type: 'integer' }, model: { type: 'string' },
          choices: {
            type: 'array', items: {
              type: 'object', required: ['index', 'message', 'finish_reason'],
              properties: {
                index: { type: 'integer' }, finish_reason: { enum: ['stop', 'length', 'tool_calls', 'content_filter'] },
                message: { type: 'object', required: ['role', 'content'], properties: { role: { const: 'assistant' }, content: { type: ['string', 'null'] }, tool_calls: { type: 'array' } } },
              },
            },
          },
          usage,
        },
      },
      ResponseRequest: {
        type: 'object', required: ['model', 'input'],
        properties: {
          model: { type: 'string' }, input: { oneOf: [{ type: 'string' }, { type: 'array' }] }, instructions: { type: 'string' },
          previous_response_id: { type: 'string', description: 'continues a stored response; an unknown one is 404' }, stream: { type: 'boolean' }, store: { type: 'boolean' },
          tools: { type: 'array' }, max_output_tokens: { type: 'integer', minimum: 1 }, temperature: { type: 'number' },
        },
      },
      Response: {
        type: 'object', required: ['id', 'object', 'created_at', 'status', 'model', 'output'],
        properties: {
          id: { type: 'string', pattern: '^resp_' }, object: { const: 'response' }, created_at: { type: 'integer' }, status: { type: 'string' }, model: { type: 'string' },
          output: { type: 'array' }, previous_response_id: { type: ['string', 'null'] },
          usage: { type: ['object', 'null'], properties: { input_tokens: { type: 'integer' }, output_tokens: { type: 'integer' }, total_tokens: { type: 'integer' } } },
        },
      },
      ModelList: {
        type: 'object', required: ['object', 'data'],
        properties: { object: { const: 'list' }, data: { type: 'array', items: { type: 'object', required: ['id', 'object', 'owned_by'], properties: { id: { type: 'string' }, object: { const: 'model' }, owned_by: { type: 'string' } } } } },
      },
      EmbeddingRequest: {
        type: 'object', required: ['model', 'input'],
        properties: { model: { type: 'string' }, input: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] }, encoding_format: { enum: ['float', 'base64'] } },
      },
      EmbeddingList: {
        type: 'object', required: ['object', 'data', 'model'],
        properties: {
          object: { const: 'list' }, model: { type: 'string' },
          data: { type: 'array', items: { type: 'object', required: ['object', 'index', 'embedding'], properties: { object: { const: 'embedding' }, index: { type: 'integer' }, embedding: { oneOf: [{ type: 'array', items: { type: 'number' } }, { type: 'string' }] } } } },
          usage: { type: 'object', properties: { prompt_tokens: { type: 'integer' }, total_tokens: { type: 'integer' } } },
        },
      },
    },
    paths: {
      '/v1/chat/completions': {
        post: {
          summary: 'chat with an agent or a model (gateway.http.endpoints.chatCompletions.enabled)', ...security('POST /v1/chat/completions'),
          requestBody: body('ChatCompletionRequest'),
          responses: { 200: { ...jsonResponse('ChatCompletion', 'the answer; streamed as chat.completion.chunk events with stream: true'), content: { ...jsonResponse('ChatCompletion', '').content, ...stream('').content } }, ...errors },
        },
      },
      '/v1/responses': {
        post: {
          summary: 'a response, stored for previous_response_id (gateway.http.endpoints.responses.enabled)', ...security('POST /v1/responses'),
          requestBody: body('ResponseRequest'),
          responses: { 200: { ...jsonResponse('Response', 'the response; streamed as response.* events with stream: true'), content: { ...jsonResponse('Response', '').content, ...stream('').content } }, ...errors },
        },
      },
      '/v1/responses/{id}': {
        get: {
          summary: 'a stored response of the caller', ...security('GET /v1/responses/:id'),
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { 200: jsonResponse('Response', 'the response'), ...readErrors },
        },
      },
      '/v1/models': { get: { summary: 'agents and offered provider models', ...security('GET /v1/models'), responses: { 200: jsonResponse('ModelList', 'the models'), ...readErrors } } },
      '/v1/audio/transcriptions': {
        post: {
          summary: 'the words of an audio file, on the voice.transcribe engine (gateway.http.endpoints.audio.enabled); any model value', ...security('POST /v1/audio/transcriptions'),
          requestBody: {
            required: true,
            content: {
              'multipart/form-data': {
                schema: {
                  type: 'object', required: ['file', 'model'],
                  properties: {
                    file: { type: 'string', format: 'binary', description: 'audio in any format ffmpeg reads, at most voice.maxMB and voice.maxSeconds' },
                    model: { type: 'string' }, response_format: { enum: ['json', 'text', 'verbose_json'] }, language: { type: 'string' }, prompt: { type: 'string' }, temperature: { type: 'number' },
                  },
                },
              },
            },
          },
          responses: {
            200: {
              description: 'the transcript',
              content: { 'application/json': { schema: { type: 'object', required: ['text'], properties: { text: { type: 'string' }, duration: { type: 'number' } } } }, 'text/plain': { schema: { type: 'string' } } },
            },
            ...errors,
            400: error('not audio, no sound, longer than voice.maxSeconds, or a field the gateway does not take'),
            413: error('audio over voice.maxMB'),
            415: error('not multipart/form-data'),
            503: error('transcription is off or unavailable on this host (named in the message)'),
          },
        },
      },
      '/v1/audio/speech': {
        post: {
          summary: 'a text spoken, on the voice.speak engine (gateway.http.endpoints.audio.enabled); any model value', ...security('POST /v1/audio/speech'),
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: {
                  type: 'object', required: ['model', 'input'],
                  properties: {
                    model: { type: 'string' }, input: { type: 'string', description: 'at most voice.speak.maxChars characters' }, voice: { type: 'string', description: 'passed to an openai-compatible engine; a command engine speaks in voice.speak.voice' },
                    response_format: { enum: ['mp3', 'opus', 'wav', 'flac', 'aac', 'pcm'], default: 'mp3' }, speed: { const: 1 },
                  },
                },
              },
            },
          },
          responses: {
            200: { description: 'the audio', content: { 'audio/mpeg': { schema: { type: 'string', format: 'binary' } }, 'audio/ogg': { schema: { type: 'string', format: 'binary' } }, 'audio/wav': { schema: { type: 'string', format: 'binary' } } } },
            ...errors,
            503: error('speech is off or unavailable on this host (named in the message)'),
          },
        },
      },
      '/v1/embeddings': {
        post: {
          summary: 'embeddings from a provider\'s embedding model (gateway.http.endpoints.embeddings.enabled)', ...security('POST /v1/embeddings'),
          requestBody: body('EmbeddingRequest'), responses: { 200: jsonResponse('EmbeddingList', 'the embeddings'), ...errors },
        },
      },
    },
  };
}
