import { expect } from 'chai';
import { effectiveConfig } from '../../../../src/shared/config/keys.ts';
import { DomainError } from '../../../../src/server/kernel/errors.ts';
import { embeddingsAnswer, parseEmbeddingsRequest } from '../../../../src/server/inference/embeddings.ts';
import { modelList, offered } from '../../../../src/server/inference/models-list.ts';

const refusal = (body: unknown) => {
  try {
    parseEmbeddingsRequest(body);
  } catch (error) {
    const refused = error as DomainError;
    return [refused.code, (refused.details as { param: string }).param];
  }
  throw new Error('expected a refusal');
};

describe('inference: embeddings', () => {
  it('takes a model and one text or a list of texts', () => {
    expect(parseEmbeddingsRequest({ model: 'local/e', input: 'hello' })).to.deep.equal({ model: 'local/e', values: ['hello'], encoding: undefined });
    expect(parseEmbeddingsRequest({ model: 'local/e', input: ['a', 'b'], encoding_format: 'base64', user: 'u1' })).to.deep.equal({ model: 'local/e', values: ['a', 'b'], encoding: 'base64' });
  });

  it('names the field that is wrong, as the OpenAI API\'s clients expect', () => {
    expect(refusal([])).to.deep.equal(['invalid_value', 'body']);
    expect(refusal({ model: 'm', input: 'x', extra: 1 })).to.deep.equal(['unsupported_parameter', 'extra']);
    expect(refusal({ input: 'x' })).to.deep.equal(['invalid_value', 'model']);
    expect(refusal({ model: 'm', input: 'x', dimensions: 8 })).to.deep.equal(['unsupported_parameter', 'dimensions']);
    expect(refusal({ model: 'm', input: 'x', encoding_format: 'hex' })).to.deep.equal(['invalid_value', 'encoding_format']);
    expect(refusal({ model: 'm', input: 'x', user: 5 })).to.deep.equal(['invalid_value', 'user']);
    for (const input of ['', [], [''], [1], Array.from({ length: 2049 }, () => 'x')]) expect(refusal({ model: 'm', input }), JSON.stringify(input).slice(0, 20)).to.deep.equal(['invalid_value', 'input']);
  });

  it('answers floats, or the base64 of little-endian float32s, with the tokens counted when the model counts them', () => {
    const floats = embeddingsAnswer({ embeddings: [[0.5, -1]], tokens: 3 }, 'local/e', undefined);
    expect(floats).to.deep.equal({ object: 'list', data: [{ object: 'embedding', index: 0, embedding: [0.5, -1] }], model: 'local/e', usage: { prompt_tokens: 3, total_tokens: 3 } });
    const packed = embeddingsAnswer({ embeddings: [[0.5, -1]] }, 'local/e', 'base64');
    const bytes = Buffer.from(packed.data[0]!.embedding as string, 'base64');
    expect([bytes.readFloatLE(0), bytes.readFloatLE(4)]).to.deep.equal([0.5, -1]);
    expect(packed.usage).to.equal(undefined);
  });
});

describe('inference: the models offered', () => {
  const config = effectiveConfig({
    models: {
      providers: { local: { kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:1/v1', models: ['chat', 'both'], embeddingModels: ['embed', 'both'] } },
      aliases: { fast: 'local/chat' },
    },
  });

  it('lists the agents (and gateway for the default), each provider\'s models once, and the aliases', () => {
    const agents = [{ id: 'main', model: 'local/chat', fallbacks: [], tools: [], maxSteps: 4, queue: 'followup' as const, default: true, skills: [], routes: [], delegatesTo: [] }];
    expect(modelList(config, agents).data.map((model) => `${model.id}:${model.owned_by}`)).to.deep.equal([
      'gateway:gateway', 'gateway/main:gateway', 'local/chat:local', 'local/both:local', 'local/embed:local', 'fast:gateway',
    ]);
    expect(modelList(config, []).data.map((model) => model.id)).to.not.include('gateway');
  });

  it('offers an alias or a provider\'s chat model, nothing else', () => {
    expect(offered(config, 'fast')).to.equal(true);
    expect(offered(config, 'local/chat')).to.equal(true);
    expect(offered(config, 'local/embed'), 'an embedding model').to.equal(false);
    expect(offered(config, 'other/chat')).to.equal(false);
    expect(offered(config, '/chat')).to.equal(false);
    expect(offered(config, 'toString')).to.equal(false);
  });
});
