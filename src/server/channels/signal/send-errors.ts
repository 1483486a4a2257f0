/**
 * A send signal-cli refused, as the outbox reads it: when to try again, or
 * not at all, with what the operator can do about it.
 */
import { ChannelSendError } from '../../kernel/channel.ts';
import { SignalHttpError, SignalRpcError } from './rpc.ts';

/** signal-cli's JSON-RPC error codes (SignalJsonRpcCommandHandler). */
export const USER_ERROR = -1;
export const UNTRUSTED_KEY_ERROR = -4;
export const RATE_LIMIT_ERROR = -5;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;


export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A refused send as the outbox reads it: when to try again, or not at all. */
export function sendError(error: unknown, url: URL): ChannelSendError {
  if (error instanceof ChannelSendError) return error;
  if (error instanceof SignalRpcError) {
    const results = isObject(error.data) && isObject(error.data.response) && Array.isArray(error.data.response.results) ? error.data.response.results.filter(isObject) : [];
    const types = new Set(results.map((result) => result.type));
    if (error.code === RATE_LIMIT_ERROR || types.has('RATE_LIMIT_FAILURE')) {
      const seconds = Math.max(0, ...results.map((result) => (typeof result.retryAfterSeconds === 'number' ? result.retryAfterSeconds : 0)));
      const captcha = results.some((result) => typeof result.token === 'string')
        ? '; Signal asks for a captcha: signal-cli submitRateLimitChallenge --challenge <token> --captcha <captcha> (https://signalcaptchas.org/challenge/generate.html)' : '';
      return new ChannelSendError(`Signal: rate limited${seconds ? ` for ${seconds} s` : ''}${captcha}`, { retryAfterMs: (seconds || 60) * 1000 });
    }
    if (error.code === UNTRUSTED_KEY_ERROR || types.has('IDENTITY_FAILURE')) {
      // Fixed by the operator, not by time: tried again as usual meanwhile.
      return new ChannelSendError('Signal: the recipient\'s safety number changed; once checked, trust it: signal-cli -a <number> trust -a <recipient>');
    }
    if (results.length > 0 && [...types].every((type) => type === 'UNREGISTERED_FAILURE')) return new ChannelSendError('Signal: the recipient is not registered with Signal', { permanent: true });
    if (types.has('NETWORK_FAILURE')) return new ChannelSendError('Signal: a network failure reaching the recipient');
    // A user error with no results: no such group, not a member, a recipient signal-cli cannot read. Trying again cannot help.
    if (error.code === USER_ERROR && results.length === 0) return new ChannelSendError(`Signal: ${error.message}`, { permanent: true });
    if (error.code === INVALID_PARAMS || error.code === METHOD_NOT_FOUND) return new ChannelSendError(`signal-cli: ${error.message}`);
    return new ChannelSendError(`Signal: ${error.message}`);
  }
  if (error instanceof SignalHttpError) return new ChannelSendError(`signal-cli: ${error.message}`);
  return new ChannelSendError(`cannot reach signal-cli at ${url.origin}: ${(error as NodeJS.ErrnoException)?.code ?? (error as Error)?.message ?? String(error)}`);
}
