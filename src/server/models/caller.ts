/**
 * Calls models under each provider's policy: timeouts (total, first token,
 * stall, where every byte from upstream, keepalive comments included, counts
 * as activity), retries with backoff that honour Retry-After, fallbacks to
 * the next model on the statuses its provider names, and a record of every
 * call with the tokens the provider counted.
 */
import type { Logger } from 'pino';
import type { GatewayConfig, ProviderSettings } from '../../shared/config/types.ts';
import { DomainError } from '../kernel/errors.ts';
import type { ChatMessage, StepEvent, StepRequest, Usage, UserPart } from './adapter.ts';
import { heldToolImage } from '../kernel/tool-images.ts';
import { resolveModel, type ModelTarget } from './catalog.ts';
import { upstreamFetch, type FetchWatch } from '../kernel/upstream-fetch.ts';
import type { UsageLog } from './usage-log.ts';
import type { Budgets } from './budgets.ts';
import { costOf, priceOf } from './prices.ts';
import { observe, observed, type ModelCallObserved, type ModelCostObserved } from '../kernel/observe.ts';

/** Who a call is for, for the usage log. */
export interface CallMeta {
  agent?: string;
  sessionKey?: string;
  /** The credential's owner on the inference API (a token's owner, gateway, a JWT subject). */
  subject?: string;
  /** Where the call came from: channel, chat, api, webchat. */
  surface: string;
  /** The agent run the call is a step of. */
  runId?: string;
  /** The person the conversation is with (kernel/person.ts): usage and spend are shown per person. */
  person?: string;
  /** The agent that delegated the run (agents.delegate): the call counts to it too. */
  delegatedBy?: string;
  /** Every agent above the run in its delegation chain, first the one whose run started it: the call counts to each. */
  delegators?: string[];
}

export type CallEvent = StepEvent | { type: 'model'; ref: string; providerId: string };

class Timeout extends Error {
  readonly which: 'total' | 'first token' | 'stall';

  constructor(which: 'total' | 'first token' | 'stall', ms: number) {
    super(`no ${which === 'total' ? 'answer in full' : which === 'stall' ? 'data' : 'first token'} within ${ms} ms`);
    this.which = which;
  }
}

const sleep = (ms: number, signal: AbortSignal) => new Promise<void>((resolve, reject) => {
  if (signal.aborted) return reject(signal.reason);
  const timer = setTimeout(resolve, ms);
  signal.addEventListener('abort', () => { clearTimeout(timer); reject(signal.reason); }, { once: true });
});

/** Each call's watch, by the abort signal it passes to fetch: the last moment it heard from upstream, and who waits for its request to leave. */
const watches = new WeakMap<AbortSignal, FetchWatch & { at: number }>();

/** One fetch for every provider (so providers are made once and kept): each call is watched through its abort signal. */
const watchedFetch: typeof globalThis.fetch = (input, init) => {
  const watch = init?.signal ? watches.get(init.signal) : undefined;
  return upstreamFetch(input, init, watch);
};

/** The SDK's side, imported on the first call. */
let adapterModule: Promise<typeof import('./adapter.ts')> | undefined;
const loadAdapter = () => (adapterModule ??= import('./adapter.ts'));

const retryable = (status: number | undefined) => status === undefined || status === 408 || status === 429 || status >= 500;

export interface ModelCallerDeps {
  config: () => GatewayConfig;
  apiKey: (providerId: string) => Promise<string | undefined>;
  usage: UsageLog;
  logger: Logger;
  /** Caps on spending, checked before a call and told of what it cost after. */
  budgets?: Budgets;
}

export class ModelCaller {
  private readonly deps: ModelCallerDeps;

  constructor(deps: ModelCallerDeps) {
    this.deps = deps;
  }

  /**
   * One model call over a list of models (the first, then fallbacks). Events
   * stream as they come; a failure before any output is retried or falls back,
   * a failure after output ends the call (what was said cannot be taken back).
   */
  async *step(refs: readonly string[], request: StepRequest, meta: CallMeta): AsyncGenerator<CallEvent> {
    if (refs.length === 0) throw new DomainError('invalid_config', 'No model to call: give the agent a model (agents.<id>.model).');
    // A cap spent refuses the call before anything is sent.
    await this.deps.budgets?.admit(meta);
    const adapter = await loadAdapter();
    let lastError: DomainError | undefined;
    for (const [index, reference] of refs.entries()) {
      const target = resolveModel(this.deps.config(), reference);
      const { provider } = target;
      if (!provider.kind) throw new DomainError('invalid_config', `Provider ${target.providerId} has no kind: gateway config set models.providers.${target.providerId}.kind openai-compatible`);
      const apiKey = await this.deps.apiKey(target.providerId);
      for (let attempt = 0; ; attempt++) {
        const started = Date.now();
        let firstTokenAt: number | undefined;
        let usage: Usage = {};
        let emitted = false;
        const controller = new AbortController();
        const onOuterAbort = () => controller.abort(request.signal.reason);
        request.signal.addEventListener('abort', onOuterAbort, { once: true });
        const { timeouts } = provider;
        // Silence is checked a few times per stall bound, not re-armed at every byte.
        const heard: FetchWatch & { at: number } = {
          at: started,
          sent: request.onSent,
          heard() {
            heard.at = Date.now();
          },
        };
        watches.set(controller.signal, heard);
        const stall = setInterval(() => {
          if (Date.now() - heard.at >= timeouts.stallMs) controller.abort(new Timeout('stall', timeouts.stallMs));
        }, Math.max(20, Math.floor(timeouts.stallMs / 4)));
        const total = setTimeout(() => controller.abort(new Timeout('total', timeouts.totalMs)), timeouts.totalMs);
        const firstToken = setTimeout(() => controller.abort(new Timeout('first token', timeouts.firstTokenMs)), timeouts.firstTokenMs);
        try {
          const connection = {
            kind: provider.kind, baseUrl: provider.baseUrl, apiKey, headers: provider.headers, model: target.model, fetch: watchedFetch,
          };
          // A model not known to take images reads them by name; one that does also sees the pictures the last step's tools made.
          const messages = takesImages(target) ? withToolImages(request.messages) : namingImages(request.messages);
          for await (const event of adapter.streamStep(connection, { ...request, messages, signal: controller.signal })) {
            if (!emitted && event.type !== 'finish') {
              emitted = true;
              firstTokenAt = Date.now();
              clearTimeout(firstToken);
              yield { type: 'model', ref: target.ref, providerId: target.providerId };
            }
            if (event.type === 'finish') usage = event.usage;
            heard.at = Date.now();
            yield event;
          }
          if (!emitted) yield { type: 'model', ref: target.ref, providerId: target.providerId };
          this.record(target, meta, { started, firstTokenAt, usage, outcome: 'ok' });
          return;
        } catch (thrown) {
          const cause = controller.signal.aborted ? controller.signal.reason : thrown;
          if (request.signal.aborted) {
            this.record(target, meta, { started, firstTokenAt, usage, outcome: 'aborted' });
            throw request.signal.reason ?? cause;
          }
          const { status, retryAfterMs, message } = cause instanceof Timeout ? { status: undefined, retryAfterMs: undefined, message: `timed out: ${cause.message}` } : adapter.upstreamFacts(cause);
          this.record(target, meta, { started, firstTokenAt, usage, outcome: cause instanceof Timeout ? 'timeout' : 'error', status, error: message });
          lastError = upstreamError(target, status, message);
          if (emitted) throw lastError;
          const delay = this.retryDelay(provider, attempt, status, retryAfterMs);
          if (delay !== undefined) {
            this.deps.logger.warn({ model: target.ref, status, attempt: attempt + 1, inMs: delay }, 'model call failed; retrying');
            await sleep(delay, request.signal);
            continue;
          }
          const fallback = index < refs.length - 1 && (status === undefined || provider.fallbackOn.includes(status));
          if (fallback) {
            this.deps.logger.warn({ model: target.ref, status, next: refs[index + 1] }, 'model call failed; falling back');
            break;
          }
          throw lastError;
        } finally {
          clearTimeout(total);
          clearTimeout(firstToken);
          clearInterval(stall);
          request.signal.removeEventListener('abort', onOuterAbort);
        }
      }
    }
    throw lastError!;
  }

  /** The wait before another attempt, or undefined when there is none: Retry-After wins, else backoff doubling from the base. */
  private retryDelay(provider: ProviderSettings, attempt: number, status: number | undefined, retryAfterMs: number | undefined): number | undefined {
    const { max, baseDelayMs, maxDelayMs } = provider.retries;
    if (attempt >= max || !retryable(status)) return undefined;
    if (retryAfterMs !== undefined) return retryAfterMs <= maxDelayMs ? retryAfterMs : undefined;
    return Math.min(maxDelayMs, baseDelayMs * 2 ** attempt);
  }

  private record(target: ModelTarget, meta: CallMeta, call: { started: number; firstTokenAt?: number; usage: Usage; outcome: 'ok' | 'error' | 'aborted' | 'timeout'; status?: number; error?: string }): void {
    const latencyMs = Date.now() - call.started;
    const config = this.deps.config();
    // Priced on its way to the log (the table loads on the first call that needs it): the caller is not kept waiting.
    const recorded = priceOf(config, target.providerId, target.model).then((price) => ({
      at: call.started, provider: target.providerId, model: target.model, agent: meta.agent, sessionKey: meta.sessionKey, subject: meta.subject,
      surface: meta.surface, inputTokens: call.usage.inputTokens, outputTokens: call.usage.outputTokens, cachedInputTokens: call.usage.cachedInputTokens, latencyMs,
      firstTokenMs: call.firstTokenAt === undefined ? undefined : call.firstTokenAt - call.started, outcome: call.outcome, status: call.status, error: call.error,
      costMicros: costOf(price, call.usage), currency: price?.currency, ...whoOf(meta), ...(meta.delegatedBy ? { delegatedBy: meta.delegatedBy } : {}),
      ...(meta.delegators?.length ? { delegators: meta.delegators } : {}),
    }));
    this.deps.usage.record(recorded, (error) => this.deps.logger.error({ err: error }, 'could not record a model call'));
    void recorded.then((entry) => {
      if (entry.costMicros) {
        observe(observed.modelCost, (): ModelCostObserved => ({ provider: target.providerId, model: target.model, agent: meta.agent ?? 'none', currency: entry.currency!, cost: entry.costMicros! / 1_000_000 }));
      }
    }, () => undefined);
    if (this.deps.budgets) {
      void recorded.then((entry) => (entry.costMicros ? this.deps.budgets!.spent(meta) : undefined))
        .catch((error: unknown) => this.deps.logger.warn({ err: error }, 'could not check a budget after a model call'));
    }
    observe(observed.modelCall, (): ModelCallObserved => ({
      provider: target.providerId, model: target.model, agent: meta.agent ?? 'none', surface: meta.surface, outcome: call.outcome, ...(meta.runId ? { runId: meta.runId } : {}),
      seconds: (Date.now() - call.started) / 1000,
      ...(call.firstTokenAt === undefined ? {} : { firstTokenSeconds: (call.firstTokenAt - call.started) / 1000 }),
      ...(call.usage.inputTokens === undefined ? {} : { inputTokens: call.usage.inputTokens }),
      ...(call.usage.outputTokens === undefined ? {} : { outputTokens: call.usage.outputTokens }),
    }));
  }
}

/** The automation, channel and person a call was for, as the log keeps them. */
function whoOf(meta: CallMeta): { automation?: string; channel?: string; person?: string } {
  const automation = meta.subject?.startsWith('automation:') ? meta.subject.slice('automation:'.length) : undefined;
  const person = meta.person ?? (automation ? meta.subject : undefined);
  const channel = person?.startsWith('peer:') ? person.split(':')[1] : meta.surface === 'channel' && meta.sessionKey ? meta.sessionKey.split(':')[0] : undefined;
  return { ...(automation ? { automation } : {}), ...(channel ? { channel } : {}), ...(person ? { person } : {}) };
}

/** What a failed model call answers: a provider's refusal of the request as such is the caller's (400), the rest the provider's (502). */
function upstreamError(target: ModelTarget, status: number | undefined, message: string): DomainError {
  const what = `Provider ${target.providerId} (${target.ref}) ${status === undefined ? 'failed' : `answered ${status}`}: ${message}`;
  return new DomainError(status === 400 || status === 422 ? 'invalid' : 'upstream', what, { code: 'upstream_error', details: { provider: target.providerId, ...(status ? { status } : {}) } });
}

/** Whether the configuration says a model takes images (models.providers.<id>.imageModels). */
export function takesImages(target: ModelTarget): boolean {
  const listed = target.provider.imageModels ?? [];
  return listed.includes('*') || listed.includes(target.model);
}

/**
 * The conversation with the images the last step's tools made (a screenshot,
 * kernel/tool-images.ts) shown after their results, as a turn of pictures:
 * chat APIs take images from the user's side, not in a tool's result.
 * Earlier steps' images stay named by their results.
 */
export function withToolImages(messages: readonly ChatMessage[]): ChatMessage[] {
  let first = messages.length;
  while (first > 0 && messages[first - 1]!.role === 'tool') first--;
  const parts: UserPart[] = [];
  for (const message of messages.slice(first)) {
    if (message.role !== 'tool' || message.isError) continue;
    const image = heldToolImage(message.content);
    if (!image) continue;
    parts.push({ type: 'text', text: `The image ${message.toolName} made (${image.name}):` }, { type: 'image', name: image.name, mimeType: image.mimeType, data: image.data });
  }
  return parts.length === 0 ? messages as ChatMessage[] : [...messages, { role: 'user', content: parts }];
}

/** The conversation with every image part replaced by a line naming it. */
export function namingImages(messages: readonly ChatMessage[]): ChatMessage[] {
  if (!messages.some((message) => message.role === 'user' && typeof message.content !== 'string')) return messages as ChatMessage[];
  return messages.map((message) => {
    if (message.role !== 'user' || typeof message.content === 'string') return message;
    const text = message.content.map((part) => (part.type === 'text' ? part.text : `[image ${part.name} (${part.mimeType}, ${Math.max(1, Math.round(part.data.length / 1024))} KB): this model does not take images]`));
    return { role: 'user', content: text.filter((line) => line.trim()).join('\n') };
  });
}
