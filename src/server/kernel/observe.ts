/**
 * What the daemon tells whoever observes it (the metrics module, when
 * metrics are on), through node:diagnostics_channel: published only while
 * someone subscribes, so a daemon without metrics pays a property read.
 * Labels are bounded by construction: route templates, never paths with ids;
 * configured names (channels, providers, models, agents), never senders or
 * session keys.
 */
import diagnostics from 'node:diagnostics_channel';
import type { ServerResponse } from 'node:http';

/** A response that knows the template of the route that answered it (set by the router), for its observation. */
export type Routed = ServerResponse & { gatewayRoute?: string };

/** An HTTP request answered: its method, its route's template (or "unmatched"), its status, how long it took. */
export interface HttpObserved { method: string; route: string; status: number; seconds: number }
/** One call of a model (an agent run's step, an inference request): its outcome, duration, first token and tokens. */
export interface ModelCallObserved {
  provider: string; model: string; agent: string; surface: string;
  /** The agent run it is a step of, when it is one. */
  runId?: string;
  outcome: 'ok' | 'error' | 'aborted' | 'timeout';
  seconds: number; firstTokenSeconds?: number; inputTokens?: number; outputTokens?: number;
}
/** What a model call cost, once priced (after the call itself was observed). */
export interface ModelCostObserved { provider: string; model: string; agent: string; currency: string; cost: number }
/** An agent run starting and ending: what traces of it (telemetry.otlp) are made from. No session key, no text. */
export type AgentRunObserved =
  | { phase: 'start'; runId: string; agent: string; surface: string; at: number }
  | { phase: 'end'; runId: string; status: string; model: string | null; inputTokens?: number; outputTokens?: number; steps: number; error?: string; at: number };
/** A tool call answered: its tool, who called it, when it started and ended, whether it failed (never its arguments or result). */
export interface ToolCallObserved { tool: string; surface: string; runId?: string; startedAt: number; endedAt: number; error?: string }
/** A channel message stored (in) or taken by its platform (out). */
export interface ChannelMessageObserved { channel: string; direction: 'in' | 'out' }
/** A webhook delivery answered: its event once its signature held (else "unverified"), and what became of it. */
export interface WebhookDeliveryObserved { event: string; outcome: 'accepted' | 'duplicate' | 'refused' }

export const observed = {
  http: diagnostics.channel('gateway.http.request'),
  modelCall: diagnostics.channel('gateway.model.call'),
  modelCost: diagnostics.channel('gateway.model.cost'),
  channelMessage: diagnostics.channel('gateway.channel.message'),
  webhookDelivery: diagnostics.channel('gateway.webhook.delivery'),
  agentRun: diagnostics.channel('gateway.agent.run'),
  toolCall: diagnostics.channel('gateway.tool.call'),
};

export function observe<T>(channel: diagnostics.Channel, message: () => T): void {
  if (channel.hasSubscribers) channel.publish(message());
}
