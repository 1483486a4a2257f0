/**
 * The inference API, compatible with the OpenAI API its clients speak:
 * POST /v1/chat/completions, POST /v1/responses (and GET /v1/responses/:id),
 * GET /v1/models, POST /v1/embeddings. Each endpoint is off until its
 * setting turns it on; callers need the gateway credential or a token with
 * the inference scope, within their credential's limits; errors answer in
 * the convention those clients parse.
 */
import { ROUTE_SCOPES } from '../../shared/api/routes.ts';
import agentsModule from '../agents/module.ts';
import jobsModule from '../jobs/module.ts';
import { DomainError, methodNotAllowed } from '../kernel/errors.ts';
import { defineModule, type HttpRoute, type Principal, type RouteContext } from '../kernel/module.ts';
import modelsModule from '../models/module.ts';
import voiceModule from '../voice/module.ts';
import { endpointOff, metered, prepareCall, subjectOf, type CallDeps } from './call.ts';
import { chatCompletion, parseChatRequest } from './chat-completions.ts';
import { inferenceDocument } from './document.ts';
import { badField, inferenceErrorBody } from './errors.ts';
import { InferenceLimits } from './limits.ts';
import { speech, transcription } from './audio.ts';
import { createResponse, parseResponsesRequest, RESPONSE_MIGRATIONS, ResponseStore } from './responses.ts';

type Endpoint = 'chatCompletions' | 'responses' | 'models' | 'embeddings' | 'audio';

export default defineModule({
  id: 'inference',
  needs: [agentsModule, modelsModule, jobsModule, voiceModule],
  migrations: RESPONSE_MIGRATIONS,
  setup(ctx) {
    const agents = ctx.use(agentsModule);
    const models = ctx.use(modelsModule);
    const responses = new ResponseStore(ctx.store);
    ctx.use(jobsModule).retention('storedResponses', (retentionMs) => responses.prune(retentionMs));
    const limits = new InferenceLimits(ctx.config, (subject, since) => models.usage.tokensSince(subject, since));
    const offered = (model: string) => {
      const { models: { providers, aliases } } = ctx.config();
      if (Object.hasOwn(aliases, model)) return true;
      const slash = model.indexOf('/');
      const provider = model.slice(0, slash);
      return slash > 0 && Object.hasOwn(providers, provider) && providers[provider]!.models.includes(model.slice(slash + 1));
    };
    const deps: CallDeps = { agents, limits, config: ctx.config, offered, onUnexpected: (error) => ctx.log.error({ err: error }, 'inference request failed') };
    const enabled = (endpoint: Endpoint) => ctx.config().gateway.http.endpoints[endpoint].enabled;
    const voice = ctx.use(voiceModule);
    const json = { types: ['application/json'], limit: () => ctx.config().inference.maxBodyBytes };
    const body = (http: RouteContext) => http.received!.value;
    const route = (method: string, path: string, scope: keyof typeof ROUTE_SCOPES, endpoint: Endpoint | (() => boolean), handler: HttpRoute['handler'], takes = json) => ctx.http.route({
      method, path, auth: { scope: ROUTE_SCOPES[scope] }, errorBody: inferenceErrorBody,
      ...(method === 'POST' ? { body: takes } : {}),
      // Before the body is read: an endpoint switched off, then the credential's limits (the gateway's own credential is not metered).
      admit: async (http) => {
        const on = typeof endpoint === 'function' ? endpoint() : enabled(endpoint);
        if (!on) throw endpointOff(path, typeof endpoint === 'function' ? 'models' : endpoint);
        const principal = http.state.principal as Principal;
        if (metered(principal)) await limits.admit(subjectOf(principal));
      },
      handler,
    });

    ctx.http.reserve('/v1');
    route('POST', '/v1/chat/completions', 'POST /v1/chat/completions', 'chatCompletions', async (http) => {
      const request = parseChatRequest(body(http));
      await chatCompletion(prepareCall(http, request, deps), agents);
    });
    route('POST', '/v1/responses', 'POST /v1/responses', 'responses', async (http) => {
      const request = parseResponsesRequest(body(http));
      await createResponse(prepareCall(http, request, deps), agents, responses);
    });
    route('GET', '/v1/responses/:id', 'GET /v1/responses/:id', 'responses', async (http) => {
      const found = await responses.get(http.params.id, (http.state.principal as Principal).subject);
      if (!found) throw new DomainError('not_found', `Response with id '${http.params.id}' not found.`, { code: 'response_not_found' });
      http.body = found;
    });
    // Clients list models before they chat: the list answers whenever any endpoint that takes a model is on.
    route('GET', '/v1/models', 'GET /v1/models', () => enabled('models') || enabled('chatCompletions') || enabled('responses') || enabled('embeddings'), (http) => {
      const config = ctx.config();
      const agentList = agents.list();
      const data = [
        ...(agentList.length ? [{ id: 'gateway', object: 'model', created: 0, owned_by: 'gateway' }] : []),
        ...agentList.map((agent) => ({ id: `gateway/${agent.id}`, object: 'model', created: 0, owned_by: 'gateway' })),
        ...Object.entries(config.models.providers).flatMap(([provider, settings]) => [...new Set([...settings.models, ...settings.embeddingModels])].map((model) => ({ id: `${provider}/${model}`, object: 'model', created: 0, owned_by: provider }))),
        ...Object.keys(config.models.aliases).map((alias) => ({ id: alias, object: 'model', created: 0, owned_by: 'gateway' })),
      ];
      http.body = { object: 'list', data };
    });
    route('POST', '/v1/embeddings', 'POST /v1/embeddings', 'embeddings', async (http) => {
      const request = body(http);
      if (!request || typeof request !== 'object' || Array.isArray(request)) throw badField('body', 'The body must be a JSON object {model, input}.');
      const { model, input, encoding_format: encoding, dimensions, user, ...rest } = request as Record<string, unknown>;
      const unknown = Object.keys(rest);
      if (unknown.length > 0) throw badField(unknown[0]!, `Unsupported field: ${unknown.join(', ')}.`, 'unsupported_parameter');
      if (typeof model !== 'string' || !model) throw badField('model', 'model is required: an embedding model GET /v1/models lists.');
      if (dimensions !== undefined) throw badField('dimensions', 'dimensions are not supported: the model decides.', 'unsupported_parameter');
      if (encoding !== undefined && encoding !== 'float' && encoding !== 'base64') throw badField('encoding_format', 'encoding_format must be float or base64.');
      if (user !== undefined && typeof user !== 'string') throw badField('user', 'user must be a string.');
      const values = typeof input === 'string' ? [input] : input;
      if (!Array.isArray(values) || values.length === 0 || values.length > 2048 || !values.every((value) => typeof value === 'string' && value.length > 0)) {
        throw badField('input', 'input must be a non-empty string or an array of at most 2048 non-empty strings.');
      }
      const principal = http.state.principal as Principal;
      const subject = subjectOf(principal);
      const gone = new AbortController();
      http.res.on('close', () => !http.res.writableFinished && gone.abort(new Error('the client went away')));
      const result = await models.embed(model, values as string[], { subject, surface: 'api' }, gone.signal);
      if (metered(principal)) limits.spent(subject, result.tokens ?? 0);
      http.body = {
        object: 'list',
        data: result.embeddings.map((vector, index) => ({
          object: 'embedding', index, embedding: encoding === 'base64' ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector,
        })),
        model,
        usage: result.tokens === undefined ? undefined : { prompt_tokens: result.tokens, total_tokens: result.tokens },
      };
    });
    // Audio: the upload is bounded by voice.maxMB (and a little for the form around it).
    const upload = { types: ['multipart/form-data'], raw: true, limit: () => ctx.config().voice.maxMB * 1024 * 1024 + 64 * 1024 };
    const caller = (http: RouteContext) => ({ subject: subjectOf(http.state.principal as Principal) });
    route('POST', '/v1/audio/transcriptions', 'POST /v1/audio/transcriptions', 'audio', (http) => transcription(http, voice, caller(http)), upload);
    route('POST', '/v1/audio/speech', 'POST /v1/audio/speech', 'audio', (http) => speech(http, voice, caller(http)));
    // Anything else under /v1 answers in the same convention: 405 naming the methods a path has, else 404.
    ctx.http.route({
      method: '*', path: '/v1', match: 'prefix', auth: 'public', errorBody: inferenceErrorBody,
      handler: (http) => {
        const allowed = ctx.table().allowedMethods(http.path).filter((method) => method !== '*');
        if (allowed.length > 0) throw methodNotAllowed(http.method, allowed);
        throw new DomainError('not_found', `No route for ${http.method} ${http.path}.`, { code: 'unknown_url' });
      },
    });
    ctx.http.document(inferenceDocument());
  },
});
