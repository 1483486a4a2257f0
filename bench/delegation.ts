/**
 * Delegation's overhead, in one run: an agent asked over /v1/chat/completions
 * that hands the question to a child agent (agents.delegate, waiting) and
 * passes on its answer, beside the child agent asked directly, alternating.
 * The model answers at once (a scripted upstream), so what is measured is the
 * gateway's part: the delegation's rows and job, the child's session and run,
 * and the parent's two model steps around it (each a round trip to the
 * upstream, which the direct call does not make). Added milliseconds, p50 and p99.
 */
import { Home, freePort } from '../test/support/cli.ts';
import { openaiText, openaiToolCalls, ScriptedUpstream } from '../test/support/scripted-upstream.ts';
import { ms, type Figure } from './support.ts';

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]!;

export async function runDelegationBench(requests = Number(process.env.BENCH_DELEGATIONS ?? 200)): Promise<Figure[]> {
  const upstream = await new ScriptedUpstream().start();
  // The parent delegates at its first step and passes the answer on at its second; the child answers at once.
  upstream.responder = (request) => {
    const messages = request.body.messages as { role: string; content: string }[];
    const parent = messages.some((message) => message.role === 'system' && message.content.includes('You delegate.'));
    if (!parent) return openaiText('forty-two', { prompt_tokens: 5, completion_tokens: 2 }, { pieces: 1 });
    return messages.at(-1)!.role === 'tool' ? openaiText('The child says forty-two.', { prompt_tokens: 9, completion_tokens: 5 }, { pieces: 1 })
      : openaiToolCalls([{ name: 'agents_delegate', args: { agent: 'child', task: 'What is six times seven?' } }]);
  };
  const port = await freePort();
  const home = new Home({ GATEWAY_PORT: String(port) });
  try {
    await home.set('models.providers.script', { kind: 'openai-compatible', baseUrl: upstream.url, models: ['m'], retries: { max: 0 } });
    await home.set('agents.child', { model: 'script/m', history: 0 });
    await home.set('agents.parent', { model: 'script/m', history: 0, instructions: 'You delegate.', delegation: { agents: ['child'], maxChildren: 64 } });
    await home.set('gateway.http.endpoints.chatCompletions.enabled', true);
    await home.set('gateway.rateLimit.max', 10_000_000);
    const started = await home.run(['start']);
    if (started.code !== 0) throw new Error(`gateway start: ${started.stderr}`);
    const token = home.token();
    const ask = async (model: string) => {
      const at = performance.now();
      const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'What is six times seven?' }] }),
      });
      const body = await response.json() as { choices?: { message: { content: string } }[] };
      if (!response.ok || !body.choices?.[0]?.message.content.includes('forty-two')) throw new Error(`${model} answered ${response.status}: ${JSON.stringify(body)}`);
      return performance.now() - at;
    };
    for (let i = 0; i < 20; i++) { await ask('gateway/child'); await ask('gateway/parent'); }
    const direct: number[] = [];
    const delegated: number[] = [];
    for (let i = 0; i < requests; i++) {
      direct.push(await ask('gateway/child'));
      delegated.push(await ask('gateway/parent'));
    }
    const [d50, d99, p50, p99] = [percentile(direct, 50), percentile(direct, 99), percentile(delegated, 50), percentile(delegated, 99)];
    return [{
      name: `delegation added, p50 / p99 (${requests} each, alternating)`,
      value: `${ms(p50)} / ${ms(p99)} ms delegated`, baseline: `${ms(d50)} / ${ms(d99)} ms child asked directly`,
      comparison: `+${ms(p50 - d50)} / +${ms(p99 - d99)} ms`, target: '<= +50 ms p50', ok: p50 - d50 <= 50,
    }];
  } finally {
    await home.run(['stop']);
    home.cleanup();
    await upstream.stop();
  }
}
