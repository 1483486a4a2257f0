// A real language model behind an OpenAI-compatible API, for the gateway's tests:
// node-llama-cpp with ../shared/models/stories260K.gguf, one thread, temperature 0,
// so the text and the token counts are the same on every run.
//   node server.mjs <model.gguf> [port]   prints "listening <port>" when ready
// The story model is not instruction-tuned: it continues the last user message. Asked
// for a tool call (tool_choice "required" or a named function), it writes the arguments
// under a grammar made from the tool's JSON Schema, so they always parse.
import { createServer } from 'node:http';
import { getLlama, LlamaCompletion } from 'node-llama-cpp';

const [modelPath, portArg = '0'] = process.argv.slice(2);
const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({ threads: 1, contextSize: 1024 });
const sequence = context.getSequence();
const embeddings = await model.createEmbeddingContext({ threads: 1 });

// One generation at a time: the context has one sequence.
let queue = Promise.resolve();
const serially = (work) => {
  const run = queue.then(work, work);
  queue = run.catch(() => undefined);
  return run;
};

const countTokens = (text) => model.tokenize(text).length;

/** Generates a continuation; calls onText with each new piece of text. */
function complete(prompt, { maxTokens, grammar, onText }) {
  return serially(async () => {
    sequence.clearHistory();
    const completion = new LlamaCompletion({ contextSequence: sequence });
    let tokens = 0;
    const text = await completion.generateCompletion(prompt, {
      maxTokens, temperature: 0, ...(grammar ? { grammar } : {}),
      onToken: (chunk) => { tokens += chunk.length; },
      onTextChunk: (chunk) => onText?.(chunk),
    });
    return { text, promptTokens: countTokens(prompt), completionTokens: tokens };
  });
}

const textOf = (content) => (typeof content === 'string' ? content
  : Array.isArray(content) ? content.map((part) => part.text ?? '').join('') : '');

const body = (req) => new Promise((resolve, reject) => {
  let data = '';
  req.on('data', (chunk) => { data += chunk; });
  req.on('end', () => { try { resolve(JSON.parse(data || '{}')); } catch (error) { reject(error); } });
});

const send = (res, status, value) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
};

let ids = 0;

async function chat(req, res) {
  const request = await body(req);
  const messages = request.messages ?? [];
  const last = messages.at(-1);
  const prompt = textOf([...messages].reverse().find((m) => m.role === 'user')?.content) || 'Once upon a time';
  const maxTokens = request.max_completion_tokens ?? request.max_tokens ?? 32;
  const id = `chatcmpl-${++ids}`;
  const created = Math.floor(Date.now() / 1000);
  const tools = request.tools ?? [];
  const choice = request.tool_choice;
  const forced = last?.role !== 'tool' && tools.length > 0 && (choice === 'required' || (choice && typeof choice === 'object'));
  const tool = forced ? (typeof choice === 'object' ? tools.find((t) => t.function.name === choice.function.name) : tools[0]) : undefined;
  const chunk = (delta, finish, extra = {}) => ({ id, object: 'chat.completion.chunk', created, model: request.model, choices: [{ index: 0, delta, finish_reason: finish }], ...extra });

  if (tool) {
    const grammar = await llama.createGrammarForJsonSchema(tool.function.parameters ?? { type: 'object' });
    const generated = await complete(prompt, { maxTokens: 48, grammar });
    const call = { id: `call_${ids}`, type: 'function', function: { name: tool.function.name, arguments: JSON.stringify(grammar.parse(generated.text)) } };
    const usage = { prompt_tokens: generated.promptTokens, completion_tokens: generated.completionTokens, total_tokens: generated.promptTokens + generated.completionTokens };
    if (!request.stream) return send(res, 200, { id, object: 'chat.completion', created, model: request.model, choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [call] }, finish_reason: 'tool_calls' }], usage });
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(`data: ${JSON.stringify(chunk({ role: 'assistant', tool_calls: [{ index: 0, ...call }] }, null))}\n\n`);
    res.write(`data: ${JSON.stringify(chunk({}, 'tool_calls'))}\n\n`);
    if (request.stream_options?.include_usage) res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: request.model, choices: [], usage })}\n\n`);
    return res.end('data: [DONE]\n\n');
  }

  if (!request.stream) {
    const generated = await complete(prompt, { maxTokens });
    return send(res, 200, {
      id, object: 'chat.completion', created, model: request.model,
      choices: [{ index: 0, message: { role: 'assistant', content: generated.text }, finish_reason: generated.completionTokens >= maxTokens ? 'length' : 'stop' }],
      usage: { prompt_tokens: generated.promptTokens, completion_tokens: generated.completionTokens, total_tokens: generated.promptTokens + generated.completionTokens },
    });
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(`data: ${JSON.stringify(chunk({ role: 'assistant', content: '' }, null))}\n\n`);
  const generated = await complete(prompt, { maxTokens, onText: (text) => res.write(`data: ${JSON.stringify(chunk({ content: text }, null))}\n\n`) });
  res.write(`data: ${JSON.stringify(chunk({}, generated.completionTokens >= maxTokens ? 'length' : 'stop'))}\n\n`);
  if (request.stream_options?.include_usage) {
    const usage = { prompt_tokens: generated.promptTokens, completion_tokens: generated.completionTokens, total_tokens: generated.promptTokens + generated.completionTokens };
    res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: request.model, choices: [], usage })}\n\n`);
  }
  res.end('data: [DONE]\n\n');
}

async function embed(req, res) {
  const request = await body(req);
  const inputs = Array.isArray(request.input) ? request.input : [request.input];
  const data = [];
  let tokens = 0;
  for (const [index, text] of inputs.entries()) {
    const { vector } = await serially(() => embeddings.getEmbeddingFor(String(text)));
    tokens += countTokens(String(text));
    const embedding = request.encoding_format === 'base64' ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : [...vector];
    data.push({ object: 'embedding', index, embedding });
  }
  send(res, 200, { object: 'list', data, model: request.model, usage: { prompt_tokens: tokens, total_tokens: tokens } });
}

const server = createServer((req, res) => {
  const path = (req.url ?? '').split('?')[0];
  const handle = req.method === 'POST' && path === '/v1/chat/completions' ? chat
    : req.method === 'POST' && path === '/v1/embeddings' ? embed
      : req.method === 'GET' && path === '/v1/models' ? (_, r) => send(r, 200, { object: 'list', data: [{ id: 'stories', object: 'model', created: 0, owned_by: 'test' }] })
        : (_, r) => send(r, 404, { error: { message: `no route ${req.method} ${path}`, type: 'invalid_request_error' } });
  Promise.resolve(handle(req, res)).catch((error) => {
    if (!res.headersSent) send(res, 500, { error: { message: String(error?.message ?? error), type: 'server_error' } });
    else res.end();
  });
});
server.listen(Number(portArg), '127.0.0.1', () => process.stdout.write(`listening ${server.address().port}\n`));
process.on('SIGTERM', () => process.exit(0));
