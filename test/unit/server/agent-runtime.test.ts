import { expect } from 'chai';
import { AgentRuntime, type RunOutcome } from '../../../src/server/agents/runtime.ts';
import { effectiveConfig } from '../../../src/shared/config/keys.ts';
import type { GatewayConfig } from '../../../src/shared/config/types.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the agent runtime\'s bounds', () => {
  it('runs ordinary inference side by side under the default bound, tool runs under their own, which holds up no other run', async () => {
    const config = effectiveConfig({}) as GatewayConfig;
    expect(config.runtime).to.include({ concurrency: 64, toolRunConcurrency: 4 });
    const runtime = new AgentRuntime(() => config);
    let now = 0;
    let peak = 0;
    let peakTools = 0;
    let nowTools = 0;
    const started: string[] = [];
    const submit = (name: string, tools: boolean) => runtime.submit({
      agentId: 'a', sessionKey: `s-${name}`, text: name, turnIds: [], tools,
      start: async ({ runId }) => {
        started.push(name);
        peak = Math.max(peak, ++now);
        if (tools) peakTools = Math.max(peakTools, ++nowTools);
        await sleep(100);
        now--;
        if (tools) nowTools--;
        return { runId, text: name } as unknown as RunOutcome;
      },
    }, 'followup');
    // Ten tool runs come first; fifty plain ones after them start at once all the same.
    const runs = [...Array.from({ length: 10 }, (_, i) => submit(`tool${i}`, true)), ...Array.from({ length: 50 }, (_, i) => submit(`plain${i}`, false))];
    await sleep(30);
    expect(started.filter((name) => name.startsWith('plain'))).to.have.length(50);
    expect(started.filter((name) => name.startsWith('tool'))).to.have.length(4);
    await Promise.all(runs);
    expect(peakTools).to.equal(4);
    expect(peak).to.equal(54);

    // Both bounds are read live: at 2 in all, the third run waits.
    config.runtime.concurrency = 2;
    started.length = 0;
    const three = [submit('x', false), submit('y', false), submit('z', true)];
    await sleep(30);
    expect(started).to.deep.equal(['x', 'y']);
    await Promise.all(three);
    expect(started).to.deep.equal(['x', 'y', 'z']);
  });
});

describe('the agent runtime\'s queue', () => {
  it('merges waiting turns of one person under collect, never turns of two people in one room', async () => {
    const runtime = new AgentRuntime(() => effectiveConfig({}) as GatewayConfig);
    const runs: { person?: string; text: string }[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    const submit = (person: string, text: string) => runtime.submit({
      agentId: 'a', sessionKey: 'telegram:default:group:-1', person, text, turnIds: [],
      start: async ({ runId, text: merged }) => {
        runs.push({ person, text: merged });
        if (runs.length === 1) await held;
        return { runId, text: merged } as unknown as RunOutcome;
      },
    }, 'collect');
    const all = [submit('peer:telegram:default:1', 'first'), submit('peer:telegram:default:1', 'a'), submit('peer:telegram:default:1', 'b'), submit('peer:telegram:default:2', 'c')];
    await sleep(20);
    release();
    await Promise.all(all);
    expect(runs).to.deep.equal([
      { person: 'peer:telegram:default:1', text: 'first' },
      { person: 'peer:telegram:default:1', text: 'a\n\nb' },
      { person: 'peer:telegram:default:2', text: 'c' },
    ]);
  });
});
