/**
 * What a model call cost: its provider's price for the model
 * (`models.providers.<id>.prices.<model>`, per million tokens, in
 * models.currency), else the bundled table of well-known models' prices
 * (@pydantic/genai-prices, in USD, used only when models.currency is USD),
 * else unknown (recorded as such, never guessed as 0). The table is loaded on
 * the first price asked for, never at start, and never fetched from the
 * network: the prices are those of the package's release.
 */
import type { GatewayConfig, ModelPrice } from '../../shared/config/types.ts';

/** Costs are kept in millionths of the currency's unit: exact sums, and a token's price still shows. */
export const MICROS = 1_000_000;

export interface PricedUsage {
  inputTokens?: number;
  outputTokens?: number;
  /** Of the input tokens, those read from the provider's cache. */
  cachedInputTokens?: number;
}

export interface Price extends ModelPrice {
  currency: string;
  source: 'configured' | 'bundled';
}

type Table = typeof import('@pydantic/genai-prices');
let table: Promise<Table | undefined> | undefined;
const bundled = () => (table ??= import('@pydantic/genai-prices').catch(() => undefined));

/** The version of the bundled table (its package), for `gateway models prices`. */
export const BUNDLED_PRICES = { package: '@pydantic/genai-prices', version: '0.1.8', released: '2026-09-23' } as const;

/** Provider kinds and the table's provider ids they most likely are, by the API's host. */
function tableProvider(baseUrl: string | undefined, kind: string | undefined): string | undefined {
  if (kind === 'anthropic') return 'anthropic';
  const host = baseUrl ? (() => {
    try {
      return new URL(baseUrl).hostname;
    } catch {
      return '';
    }
  })() : '';
  if (host === 'api.openai.com' || (!baseUrl && kind === 'openai-compatible')) return 'openai';
  if (host.endsWith('anthropic.com')) return 'anthropic';
  if (host.endsWith('groq.com')) return 'groq';
  if (host.endsWith('mistral.ai')) return 'mistral';
  if (host.endsWith('deepseek.com')) return 'deepseek';
  if (host.endsWith('openrouter.ai')) return 'openrouter';
  if (host.endsWith('x.ai')) return 'x-ai';
  if (host.endsWith('together.xyz') || host.endsWith('together.ai')) return 'together';
  if (host.endsWith('fireworks.ai')) return 'fireworks';
  if (host.endsWith('googleapis.com')) return 'google';
  return undefined;
}

/** A model's price per million tokens, or undefined when neither the configuration nor the table knows it. */
export async function priceOf(config: GatewayConfig, providerId: string, model: string): Promise<Price | undefined> {
  const provider = config.models.providers[providerId];
  const currency = config.models.currency ?? 'USD';
  const configured = provider?.prices?.[model];
  if (configured) return { ...configured, currency, source: 'configured' };
  if (currency !== 'USD' || !provider) return undefined;
  const providerIdInTable = tableProvider(provider.baseUrl, provider.kind);
  // A local server (Ollama, llama.cpp, vLLM) under a model name the table knows still costs nothing: only known hosts are priced.
  if (!providerIdInTable) return undefined;
  const prices = await bundled();
  if (!prices) return undefined;
  // Asked for a thousand tokens and scaled: a million at once would fall in some models' long-context tier.
  const sample = 1000;
  const per = (usage: { input_tokens?: number; output_tokens?: number; cache_read_tokens?: number }) => {
    try {
      const price = prices.calcPrice(usage, model, { providerId: providerIdInTable })?.total_price;
      return price === undefined ? undefined : price * (1_000_000 / sample);
    } catch {
      return undefined;
    }
  };
  const input = per({ input_tokens: sample, output_tokens: 0 });
  const output = per({ input_tokens: 0, output_tokens: sample });
  if (input === undefined || output === undefined) return undefined;
  const cachedInput = per({ input_tokens: sample, cache_read_tokens: sample, output_tokens: 0 });
  return { input, output, ...(cachedInput !== undefined ? { cachedInput } : {}), currency: 'USD', source: 'bundled' };
}

/** A call's cost in millionths of the currency, or undefined when its usage or its price is unknown. */
export function costOf(price: Price | undefined, usage: PricedUsage): number | undefined {
  if (!price || (usage.inputTokens === undefined && usage.outputTokens === undefined)) return undefined;
  const input = usage.inputTokens ?? 0;
  const cached = Math.min(usage.cachedInputTokens ?? 0, input);
  const total = (input - cached) * price.input + cached * (price.cachedInput ?? price.input) + (usage.outputTokens ?? 0) * price.output;
  // Prices are per million tokens and costs in millionths: the two millions cancel.
  return Math.round(total);
}
