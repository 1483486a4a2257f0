import { expect } from 'chai';
import { answerOf, DomainError, rateLimited, rpcErrorOf, toDomainError } from '../../../src/server/kernel/errors.ts';
import { configError, GatewayError, notFoundError, usageError } from '../../../src/shared/errors.ts';
import { ERROR_KINDS, kindOfRpcError, type ErrorKind } from '../../../src/shared/error-kinds.ts';

describe('error catalog: one mapping for HTTP, RPC and exit codes', () => {
  it('answers every kind with its status, body category and RPC code, and the CLI reads the same kind back', () => {
    for (const kind of Object.keys(ERROR_KINDS) as ErrorKind[]) {
      const error = new DomainError(kind, `a ${kind} failure`);
      const answer = answerOf(error);
      expect(answer.status, kind).to.equal(ERROR_KINDS[kind].status);
      expect(answer.body, kind).to.deep.equal({ error: ERROR_KINDS[kind].category, message: `a ${kind} failure`, statusCode: ERROR_KINDS[kind].status });
      const shape = rpcErrorOf(error);
      expect(shape.code, kind).to.equal(ERROR_KINDS[kind].rpc);
      expect(kindOfRpcError(shape.code, shape.details), kind).to.equal(kind);
    }
  });

  it('names the kind in RPC details only where the code alone means another one, and keeps details and headers', () => {
    expect(rpcErrorOf(new DomainError('not_found', 'x'))).to.deep.equal({ code: 'NOT_FOUND', message: 'x' });
    expect(rpcErrorOf(new DomainError('conflict', 'x')).details).to.deep.equal({ kind: 'conflict' });
    expect(rpcErrorOf(new DomainError('forbidden', 'x', { details: { missingScope: 'operator.admin' } })).details).to.deep.equal({ missingScope: 'operator.admin' });
    expect(rpcErrorOf(new DomainError('invalid', 'x', { code: 'registration_refused' })).details).to.deep.equal({ reason: 'registration_refused' });
    const limited = rateLimited(2500);
    expect(answerOf(limited)).to.deep.include({ status: 429, headers: { 'retry-after': '3' } });
    expect(rpcErrorOf(limited)).to.deep.include({ code: 'RATE_LIMITED', retryable: true, details: { retryAfterMs: 2500 } });
  });

  it('is one error: a domain error is a GatewayError, its exit code and its status from one kind', () => {
    const missing = new DomainError('not_found', 'no such job');
    expect(missing).to.be.an.instanceOf(GatewayError);
    expect(missing).to.include({ exitCode: 5, status: 404, code: 'NOT_FOUND' });
    expect(new DomainError('invalid_config', 'x')).to.include({ exitCode: 78, status: 400 });
    expect(new DomainError('unavailable', 'x', { code: 'storage_unavailable' })).to.include({ exitCode: 1, status: 503, code: 'storage_unavailable', reason: 'storage_unavailable' });
    // A command's own: the kind says the rest; an exit code no kind has (the daemon is not running) is named.
    expect(usageError('bad flag')).to.include({ kind: 'invalid', exitCode: 2, code: 'USAGE' });
    expect(new GatewayError('not running', { exitCode: 3 })).to.include({ kind: 'unavailable', exitCode: 3, code: 'NOT_RUNNING' });
  });

  it('keeps the shared code\'s errors as they are, maps a status of 400-499 by its status, and hides everything else', () => {
    expect(toDomainError(usageError('bad key')).error.kind).to.equal('invalid');
    expect(toDomainError(notFoundError('no such')).error.kind).to.equal('not_found');
    const config = toDomainError(configError('broken file', ['gateway config unset x'])).error;
    expect(config.kind).to.equal('invalid_config');
    expect(rpcErrorOf(config).details).to.deep.equal({ kind: 'invalid_config', hints: ['gateway config unset x'] });
    // A failure of the shared code that names no kind: it cannot be done now.
    expect(toDomainError(new GatewayError('cannot reach the keychain')).error.kind).to.equal('unavailable');
    expect(toDomainError(Object.assign(new Error('teapot'), { status: 418 })).error.kind).to.equal('invalid');
    expect(toDomainError(Object.assign(new Error('gone'), { status: 404 })).error).to.deep.include({ kind: 'not_found', message: 'gone' });
    const hidden = toDomainError(new Error('ENOENT: /secret/path'));
    expect(hidden.unexpected).to.equal(true);
    expect(hidden.error.kind).to.equal('internal');
    expect(hidden.error.message).to.not.include('/secret/path');
    expect(toDomainError(Object.assign(new Error('db down'), { status: 503 })).unexpected).to.equal(true);
    // A name the file system refuses for its length came with the request: 400, without the path.
    const long = toDomainError(Object.assign(new Error(`ENAMETOOLONG: name too long, open '/home/someone/${'a'.repeat(300)}'`), { code: 'ENAMETOOLONG' }));
    expect(long.unexpected).to.equal(false);
    expect(long.error).to.include({ kind: 'invalid', reason: 'name_too_long' });
    expect(long.error.message).to.match(/longer than the file system takes \(255 bytes a name/).and.not.include('/home/someone');
  });
});
