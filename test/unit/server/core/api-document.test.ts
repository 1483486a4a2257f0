import { expect } from 'chai';
import { apiDocument, withCommonAnswers } from '../../../../src/server/core/api-document.ts';
import { auditView } from '../../../../src/server/core/daemon-methods.ts';
import { pluginSummary } from '../../../../src/server/core/status.ts';

const jsonError = (ref: string) => ({ description: 'x', content: { 'application/json': { schema: { $ref: ref } } } });

describe('core: the API contract', () => {
  it('completes each operation with the answers any can give, in the error body it uses itself', () => {
    const item = withCommonAnswers({
      summary: 'a path-level field stays as it is',
      post: { requestBody: { content: { 'application/json': {} } }, responses: { 200: { description: 'ok' }, 404: jsonError('#/components/schemas/InferenceError') } },
      get: { responses: { 200: { description: 'ok' } } },
    });
    expect(item.summary).to.equal('a path-level field stays as it is');
    const post = (item.post as { responses: Record<string, any> }).responses;
    expect(Object.keys(post).sort()).to.deep.equal(['200', '400', '404', '405', '415', '503']);
    expect(post[405].content['application/json'].schema, 'its own error body').to.deep.equal({ $ref: '#/components/schemas/InferenceError' });
    const get = (item.get as { responses: Record<string, any> }).responses;
    expect(Object.keys(get).sort(), 'no 415 without a JSON body').to.deep.equal(['200', '400', '405', '503']);
    expect(get[503].content['application/json'].schema).to.deep.equal({ $ref: '#/components/schemas/Error' });
  });

  it('an answer the operation documents itself wins over the common one', () => {
    const mine = { description: 'mine', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    const item = withCommonAnswers({ delete: { responses: { 400: mine, 503: mine } } });
    const responses = (item.delete as { responses: Record<string, unknown> }).responses;
    expect(responses[400]).to.equal(mine);
    expect(responses[503]).to.equal(mine);
  });

  it('is an OpenAPI 3.1 document of the modules\' parts, paths in order, their schemas beside the shared ones', () => {
    const document = apiDocument({ paths: { '/b': { get: { responses: {} } }, '/a': { get: { responses: {} } } }, schemas: { Mine: { type: 'object' } } }, '1.2.3') as any;
    expect(document.openapi).to.equal('3.1.0');
    expect(document.info.version).to.equal('1.2.3');
    expect(Object.keys(document.paths)).to.deep.equal(['/a', '/b']);
    expect(document.components.schemas).to.include.keys('Mine', 'Error');
    expect(document.components.securitySchemes).to.have.keys('bearer', 'hubSignature', 'hooksToken');
  });
});

describe('core: what the daemon says of itself', () => {
  it('names the plugins loaded (never the built-in modules) and those that failed', () => {
    const summary = pluginSummary({
      plugins: () => ({
        plugins: [
          { name: 'core', status: 'loaded', builtin: true }, { name: 'greet', status: 'loaded', builtin: false }, { name: 'bad', status: 'error', builtin: false, error: 'no register' },
        ] as never,
        lastReload: null,
      }),
    });
    expect(summary).to.deep.equal({ loaded: ['greet'], errors: [{ plugin: 'bad', error: 'no register' }], lastReload: null });
  });

  it('shows an audit event with its time and its detail read back', () => {
    expect(auditView({ id: '7', at: 0, kind: 'token.created', actor: 'gateway', subject: 'tok_1', address: null, detail: '{"name":"ci"}' }))
      .to.deep.equal({ id: 7, at: '1970-01-01T00:00:00.000Z', kind: 'token.created', actor: 'gateway', subject: 'tok_1', address: null, detail: { name: 'ci' } });
    expect(auditView({ id: 8, at: 1000, kind: 'daemon.reload', actor: 'd', subject: null, address: '::1', detail: null }).detail).to.equal(null);
  });
});
