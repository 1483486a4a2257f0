/**
 * The inference API, compatible with the OpenAI API its clients speak:
 * POST /v1/chat/completions, POST /v1/responses (and GET /v1/responses/:id),
 * GET /v1/models, POST /v1/embeddings. Each endpoint is off until its
 * setting turns it on; callers need the gateway credential or a token with
 * the inference scope, within their credential's limits; errors answer in
 * the convention those clients parse. The requests and answers are in
 * call.ts, chat-completions.ts, responses.ts, embeddings.ts and
 * models-list.ts.
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
import { embeddingsAnswer, parseEmbeddingsRequest } from './embeddings.ts';
import { inferenceErrorBody } from './errors.ts';
import { InferenceLimits } from './limits.ts';
import { speech, transcription } from './audio.ts';
import { modelList, offered } from './models-list.ts';
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
    const deps: CallDeps = { agents, limits, config: ctx.config, offered: (model) => offered(ctx.config(), model), onUnexpected: (error) => ctx.log.error({ err: error }, 'inference request failed') };
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
      http.body = modelList(ctx.config(), agents.list());
    });
    route('POST', '/v1/embeddings', 'POST /v1/embeddings', 'embeddings', async (http) => {
      const { model, values, encoding } = parseEmbeddingsRequest(body(http));
      const principal = http.state.principal as Principal;
      const subject = subjectOf(principal);
      const gone = new AbortController();
      http.res.on('close', () => !http.res.writableFinished && gone.abort(new Error('the client went away')));
      const result = await models.embed(model, values, { subject, surface: 'api' }, gone.signal);
      if (metered(principal)) limits.spent(subject, result.tokens ?? 0);
      http.body = embeddingsAnswer(result, model, encoding);
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
