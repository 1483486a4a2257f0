/**
 * One request to the inference API, whatever its endpoint: who calls (and the
 * limits of their credential), which agent or model answers, which session
 * keeps the exchange, what happens when the client goes away, and how usage
 * is reported (real counts only: a provider that said nothing gets no usage,
 * never zeros).
 */
import { randomUUID } from 'node:crypto';
import type { GatewayConfig } from '../../shared/config/types.ts';
import type { RunUsage } from '../../shared/protocol/results.ts';
import type { AgentRunRequest, Agents, RunEvent, RunOutcome } from '../agents/module.ts';
import { DomainError, toDomainError } from '../kernel/errors.ts';
import { apiPerson } from '../kernel/person.ts';
import type { Principal, RouteContext } from '../kernel/module.ts';
import type { ChatMessage, ToolSpec } from '../models/module.ts';
import { modelNotFound } from '../models/module.ts';
import { badField, inferenceErrorBody, type InferenceErrorBody } from './errors.ts';
import type { InferenceLimits } from './limits.ts';
import { EventStream } from './sse.ts';

export interface RunOptions {
  conversation: ChatMessage[];
  system?: string;
  /** The new user turn, recorded in the session; none when the last message answers a tool call. */
  turn?: string;
  clientTools: ToolSpec[];
  overrides: NonNullable<AgentRunRequest['overrides']>;
  onEvent: (event: RunEvent) => void;
}

export interface InferenceCall<R> {
  request: R;
  http: RouteContext;
  principal: Principal;
  /** The caller asked to see the agent's own tool calls (x-gateway-tool-calls: show). */
  showAgentTools: boolean;
  openStream(): EventStream;
  /** Ends a stream with the error as its last event (in the endpoint's shape, else the chat completions one). */
  failStream(stream: EventStream, error: unknown, shape?: (body: InferenceErrorBody) => { event?: string; data: unknown }): void;
  run(options: RunOptions): Promise<RunOutcome>;
  usageOf(usage: RunUsage, shape: 'chat' | 'responses'): Record<string, unknown> | undefined;
}

export interface CallDeps {
  agents: Agents;
  limits: InferenceLimits;
  config: () => GatewayConfig;
  /** Whether a provider model may be asked for by name (GET /v1/models lists it). */
  offered: (model: string) => boolean;
  onUnexpected: (error: unknown) => void;
}

const SESSION_HEADER = /^[\x21-\x7e]{1,128}$/;

/** The credential a request counts against: a token by its id, others by their subject. */
export const subjectOf = (principal: Principal) => principal.credentialId ?? principal.subject;

/** Whether a principal's requests count against the inference limits: all but the gateway's own credential (and auth mode none). */
export const metered = (principal: Principal) => principal.kind !== 'gateway' && principal.kind !== 'anonymous';

/** The agent or bare model a request's `model` names: gateway, gateway/<agent>, or a listed provider model. */
export function targetOf(model: string, deps: Pick<CallDeps, 'agents' | 'offered'>): { agentId?: string; direct?: string } {
  if (model === 'gateway') return { agentId: deps.agents.resolve().id };
  if (model.startsWith('gateway/')) {
    const agentId = model.slice('gateway/'.length);
    try {
      deps.agents.resolve(agentId);
    } catch {
      throw modelNotFound(`The model ${JSON.stringify(model)} does not exist: no agent ${JSON.stringify(agentId)}.`);
    }
    return { agentId };
  }
  if (deps.offered(model)) return { direct: model };
  throw modelNotFound(`The model ${JSON.stringify(model)} does not exist or is not offered (GET /v1/models lists the models).`);
}

export function prepareCall<R extends { model: string; user?: string }>(http: RouteContext, request: R, deps: CallDeps): InferenceCall<R> {
  const principal = http.state.principal as Principal;
  const subject = subjectOf(principal);
  // The person is the request's user within its credential; without one, the credential itself, which shares nothing with its users.
  const person = apiPerson(principal, request.user);
  const target = targetOf(request.model, deps);
  const override = http.get('x-gateway-model') || undefined;
  if (override && !target.agentId) throw badField('x-gateway-model', 'x-gateway-model chooses the backend model of an agent; this request names a model already.');
  const sessionHeader = http.get('x-gateway-session') || undefined;
  if (sessionHeader !== undefined && !SESSION_HEADER.test(sessionHeader)) throw badField('x-gateway-session', 'x-gateway-session must be 1-128 visible ASCII characters.');
  const conversationName = sessionHeader ?? request.user ?? `r-${randomUUID()}`;
  const detach = http.get('x-gateway-detach') === 'true';
  // A client that goes away aborts its run, unless it asked to detach.
  const gone = new AbortController();
  http.res.on('close', () => {
    if (!http.res.writableFinished && !detach) gone.abort(new Error('the client went away'));
  });
  let stream: EventStream | undefined;

  return {
    request,
    http,
    principal,
    showAgentTools: http.get('x-gateway-tool-calls') === 'show',
    openStream() {
      http.respond = false;
      stream = new EventStream(http.req, http.res, deps.config().inference.keepaliveMs);
      return stream;
    },
    failStream(open, error, shape) {
      const { error: failure, unexpected } = toDomainError(error);
      if (unexpected) deps.onUnexpected(error);
      const body = inferenceErrorBody(failure);
      const event = shape ? shape(body) : { data: body };
      open.send(event.data, event.event);
      open.end();
    },
    async run(options) {
      if (options.clientTools.length > 0 && target.agentId) {
        const { id, settings } = deps.agents.resolve(target.agentId);
        if (!settings.clientTools) throw badField('tools', `Agent ${id} does not take tools from clients (agents.${id}.clientTools).`, 'unsupported_parameter');
      }
      const outcome = await deps.agents.run({
        ...target, model: override, conversation: options.conversation, system: options.system, text: options.turn ?? '',
        noTurn: options.turn === undefined,
        // A credential's conversations are its own, as its people are (a product token's are not its owner's other tokens').
        session: { channel: 'api', account: target.agentId ?? 'direct', kind: 'direct', peer: `${subject}/${conversationName}` },
        sender: { id: subject, person }, person, clientTools: options.clientTools, overrides: options.overrides, surface: 'api', subject,
        signal: gone.signal, onEvent: options.onEvent,
      });
      if (metered(principal)) deps.limits.spent(subject, (outcome.usage.inputTokens ?? 0) + (outcome.usage.outputTokens ?? 0));
      return outcome;
    },
    usageOf(usage, shape) {
      if (usage.inputTokens === undefined && usage.outputTokens === undefined) return undefined;
      const input = usage.inputTokens ?? 0;
      const output = usage.outputTokens ?? 0;
      return shape === 'chat'
        ? { prompt_tokens: input, completion_tokens: output, total_tokens: input + output }
        : { input_tokens: input, output_tokens: output, total_tokens: input + output, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } };
    },
  };
}

/** An endpoint that is off answers 404 saying which setting turns it on. */
export const endpointOff = (path: string, key: string) =>
  new DomainError('not_found', `${path} is not enabled on this gateway: gateway config set gateway.http.endpoints.${key}.enabled true`, { code: 'endpoint_disabled' });
