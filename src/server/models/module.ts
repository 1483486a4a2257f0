/**
 * Model providers: the providers and aliases of the configuration, API keys
 * from the secret store, every call under its provider's policy, and the log
 * of model calls behind `gateway usage`.
 */
import type { ModelInfo } from '../../shared/protocol/results.ts';
import { DomainError } from '../kernel/errors.ts';
import { defineModule } from '../kernel/module.ts';
import jobsModule from '../jobs/module.ts';
import tokensModule from '../tokens/module.ts';
import { ModelCaller, type CallMeta } from './caller.ts';
import { offeredModels, resolveModel, type ModelTarget } from './catalog.ts';
import { USAGE_MIGRATIONS, UsageLog } from './usage-log.ts';
import { BUDGET_MIGRATIONS, Budgets, noticeText } from './budgets.ts';
import { MICROS } from './prices.ts';

export type { CallEvent, CallMeta, ModelCaller } from './caller.ts';
export type { ChatMessage, StepRequest, ToolCallRecord, ToolChoice, ToolSpec, Usage, UserPart } from './adapter.ts';
export type { ModelTarget } from './catalog.ts';
export { modelNotFound } from './catalog.ts';

/** What other modules get from this one. */
export interface Models {
  caller: ModelCaller;
  resolve(reference: string): ModelTarget;
  /** Embeddings of texts with a provider's embedding model. */
  embed(reference: string, values: string[], meta: CallMeta, signal: AbortSignal): Promise<{ embeddings: number[][]; tokens?: number; ref: string }>;
  usage: UsageLog;
}

export default defineModule<Models>({
  id: 'models',
  needs: [jobsModule, tokensModule],
  migrations: [...USAGE_MIGRATIONS, ...BUDGET_MIGRATIONS].sort((a, b) => a.version - b.version),
  setup(ctx) {
    const usage = new UsageLog(ctx.store);
    ctx.use(jobsModule).retention('modelCalls', (retentionMs) => usage.prune(retentionMs));

    // API keys are read once per provider and again when `gateway secrets set` changes one.
    const keys = new Map<string, Promise<string | undefined>>();
    const apiKey = (providerId: string) => {
      let key = keys.get(providerId);
      if (!key) {
        key = ctx.secrets.get(`models.providers.${providerId}.apiKey`);
        keys.set(providerId, key);
      }
      return key;
    };
    ctx.watch.secrets(['models.providers.*'], (name) => void keys.delete(name.split('.')[2]!));
    const unrecorded = (error: unknown) => ctx.log.error({ err: error }, 'could not record a model call');
    const budgets = new Budgets({
      config: ctx.config, usage, store: ctx.store, credentialCaps: (subject) => ctx.use(tokensModule).capsOf(subject),
      notify: (notice) => {
        const text = noticeText(notice);
        ctx.log.warn({ budget: notice.setting, period: notice.period, level: notice.level }, text);
        ctx.events.emit('budget.notice', { ...notice, spent: notice.spent / MICROS, cap: notice.cap / MICROS, text }, 'operator.read');
        void ctx.store.audit(notice.level === 'reached' ? 'budget.reached' : 'budget.warning', { actor: 'gateway', subject: notice.setting, detail: { period: notice.period, spent: notice.spent / MICROS, cap: notice.cap / MICROS, currency: notice.currency } });
      },
    });
    ctx.use(jobsModule).retention('budgetNotices', () => budgets.prune(Date.now() - 62 * 86_400_000));
    const caller = new ModelCaller({ config: ctx.config, apiKey, usage, logger: ctx.log, budgets });

    const resolve = (reference: string) => resolveModel(ctx.config(), reference);
    const embed: Models['embed'] = async (reference, values, meta, signal) => {
      const target = resolve(reference);
      if (!target.provider.embeddingModels.includes(target.model)) {
        throw new DomainError('not_found', `Model ${reference} is not an embedding model of provider ${target.providerId} (models.providers.${target.providerId}.embeddingModels).`, { code: 'model_not_found' });
      }
      const { embed: embedWith, upstreamFacts } = await import('./adapter.ts');
      const started = Date.now();
      const timeout = AbortSignal.timeout(target.provider.timeouts.totalMs);
      try {
        const result = await embedWith({
          kind: target.provider.kind ?? 'openai-compatible', baseUrl: target.provider.baseUrl, apiKey: await apiKey(target.providerId),
          headers: target.provider.headers, model: target.model, fetch,
        }, values, AbortSignal.any([signal, timeout]));
        usage.record({ at: started, provider: target.providerId, model: target.model, subject: meta.subject, surface: meta.surface, inputTokens: result.tokens, latencyMs: Date.now() - started, outcome: 'ok' }, unrecorded);
        return { ...result, ref: target.ref };
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        const { status, message } = upstreamFacts(error);
        usage.record({ at: started, provider: target.providerId, model: target.model, subject: meta.subject, surface: meta.surface, latencyMs: Date.now() - started, outcome: timeout.aborted ? 'timeout' : 'error', status, error: message }, unrecorded);
        throw new DomainError('upstream', `Provider ${target.providerId} (${target.ref}) ${status ? `answered ${status}` : 'failed'}: ${timeout.aborted ? 'timed out' : message}`, { code: 'upstream_error', details: { provider: target.providerId } });
      }
    };

    ctx.rpc.method({
      name: 'models.list',
      handler: async () => {
        const config = ctx.config();
        const models: ModelInfo[] = offeredModels(config);
        const providers = await Promise.all(Object.entries(config.models.providers).map(async ([id, provider]) => ({
          id, kind: provider.kind ?? null, baseUrl: provider.baseUrl ?? null, models: provider.models, embeddingModels: provider.embeddingModels,
          apiKey: (await apiKey(id)) ? 'set' as const : 'not set' as const,
        })));
        return { providers, models, aliases: config.models.aliases };
      },
    });
    ctx.rpc.method({ name: 'usage.summary', handler: ({ since }) => usage.summary(since ?? 0, ctx.config().models.currency ?? 'USD') });

    return { caller, resolve, embed, usage };
  },
});
