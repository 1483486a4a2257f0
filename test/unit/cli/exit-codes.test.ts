import { expect } from 'chai';
import { RpcCallError } from '../../../src/cli/rpc-client.ts';
import type { ErrorCode } from '../../../src/shared/protocol/error-codes.ts';

const exitCodeForRpcError = (code: ErrorCode, details?: Record<string, unknown>) => new RpcCallError(code, 'refused', details).exitCode;

describe('exit code of an RPC error', () => {
  it('follows the code when the error names no kind', () => {
    expect(exitCodeForRpcError('NOT_FOUND')).to.equal(5);
    expect(exitCodeForRpcError('INVALID_REQUEST')).to.equal(2);
    for (const code of ['UNAUTHORIZED', 'FORBIDDEN', 'PAIRING_REQUIRED', 'UNAVAILABLE', 'RATE_LIMITED', 'INTERNAL'] as const) {
      expect(exitCodeForRpcError(code), code).to.equal(1);
    }
  });

  it('follows the kind the error names where the code alone means another one', () => {
    expect(exitCodeForRpcError('INVALID_REQUEST', { kind: 'invalid_config' })).to.equal(78);
    expect(exitCodeForRpcError('INVALID_REQUEST', { kind: 'conflict' })).to.equal(1);
    expect(exitCodeForRpcError('INVALID_REQUEST', { kind: 'too_large' })).to.equal(2);
  });

  it('ignores a kind it does not know', () => {
    expect(exitCodeForRpcError('NOT_FOUND', { kind: 'made-up' })).to.equal(5);
    expect(exitCodeForRpcError('INVALID_REQUEST', { kind: 42 })).to.equal(2);
  });
});
