/**
 * The exec tool: a shell command in a bubblewrap sandbox over the calling
 * agent's workspace, run only as the approval setting says (off, ask, an
 * allowlist, full), at most tools.exec.concurrency at once per agent and per
 * caller, and bounded in time, CPU, memory, processes, files and output.
 */
import type { ExecApproval } from '../../shared/config/schema.ts';
import type { GatewayConfig } from '../../shared/config/types.ts';
import { DomainError, rateLimited } from '../kernel/errors.ts';
import type { ToolContext, ToolDef } from '../kernel/module.ts';
import type { ExecApprovals } from '../approvals/module.ts';
import { allowedCommand } from './approvals.ts';
import { type ExecResult, runSandboxed, sandboxTools } from '../sandbox/sandbox.ts';
import { freeBytes } from '../../shared/workspace-image.ts';
import { skillBinds, type SkillLookup } from './skill-files.ts';
import type { WorkspaceLease } from './workspace.ts';
import type { Workspaces } from './workspaces.ts';

const MB = 1024 * 1024;
/** A workspace's file system with less than this free after a command is called full in the result. */
const FULL_BELOW = 64 * 1024;

type ExecSettings = GatewayConfig['tools']['exec'];

/** How commands of a call are approved: the agent's own setting, else tools.exec.approval. */
export const approvalOf = (config: GatewayConfig, agentId: string | undefined): ExecApproval =>
  (agentId ? config.agents[agentId] : undefined)?.exec.approval ?? config.tools.exec.approval;

/** Why a command must wait for an operator, or undefined when it runs at once. */
export function askReason(approval: ExecApproval, command: string, allow: readonly string[]): string | undefined {
  if (approval === 'ask') return 'every command asks (approval ask)';
  if (approval === 'allowlist' && !allowedCommand(command, allow)) return 'the command matches no tools.exec.allow pattern';
  return undefined;
}

/** What a result says of a command stopped by a limit, or undefined when it ended by itself. */
export function stopNote(result: Pick<ExecResult, 'timedOut' | 'truncated' | 'stopped'>, settings: Pick<ExecSettings, 'outputBytes' | 'workspaceMB' | 'memoryMB'>, timeoutSeconds: number): string | undefined {
  return result.timedOut ? `stopped after ${timeoutSeconds} s of wall time`
    : result.truncated ? `stopped after ${settings.outputBytes} bytes of output`
      : result.stopped === 'workspace' ? `stopped: the workspace holds more than tools.exec.workspaceMB (${settings.workspaceMB} MB); remove files to make room`
        : result.stopped === 'memory' ? `a process was stopped: the command used more than tools.exec.memoryMB (${settings.memoryMB} MB) together`
          : undefined;
}

/** Commands running now, per key (an agent, a caller): each bounded by a limit. */
export class RunningCommands {
  private readonly running = new Map<string, number>();

  /** Takes a place under every key, or names the first key at its limit (and takes none). */
  take(keys: readonly string[], limit: number): { release: () => void } | { busy: string } {
    const busy = keys.find((key) => (this.running.get(key) ?? 0) >= limit);
    if (busy) return { busy };
    for (const key of keys) this.running.set(key, (this.running.get(key) ?? 0) + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        for (const key of keys) {
          const left = (this.running.get(key) ?? 1) - 1;
          if (left > 0) this.running.set(key, left);
          else this.running.delete(key);
        }
      },
    };
  }

  count(key: string): number {
    return this.running.get(key) ?? 0;
  }
}

export interface ExecToolDeps {
  config: () => GatewayConfig;
  approvals: Pick<ExecApprovals, 'ask'>;
  workspaces: Pick<Workspaces, 'of' | 'for'>;
  /** The agents' skills, bound read-only into the sandbox. */
  skills?: SkillLookup;
  /** Runs a command in the sandbox (tests give another). */
  run?: typeof runSandboxed;
  sandbox?: typeof sandboxTools;
}

export function execTool(deps: ExecToolDeps): ToolDef {
  const running = new RunningCommands();
  const run = deps.run ?? runSandboxed;
  const sandbox = deps.sandbox ?? sandboxTools;
  return {
    name: 'exec',
    description: 'Run a shell command in a sandbox over the workspace (/workspace): the system\'s programs read-only, a private /tmp, no network unless allowed, with CPU, memory, process, time and output limits. Returns exit code, stdout and stderr.',
    dangerous: true, external: 'it runs commands (in a sandbox over the agent\'s workspace)',
    inputSchema: {
      type: 'object', additionalProperties: false, required: ['command'],
      properties: { command: { type: 'string', minLength: 1, maxLength: 16_384 }, timeout: { type: 'integer', minimum: 1, maximum: 3600, description: 'seconds of wall time' } },
    },
    handler: async (args, context: ToolContext) => {
      const command = String(args.command);
      const config = deps.config();
      const settings = config.tools.exec;
      const agentId = context.agent;
      const approval = approvalOf(config, agentId);
      if (approval === 'off') {
        throw new DomainError('forbidden', `exec is off${agentId ? ` for agent ${agentId}` : ''}: gateway config set ${agentId ? `agents.${agentId}.exec.approval` : 'tools.exec.approval'} ask (or allowlist, or full); commands always run in the sandbox.`, { code: 'exec_off' });
      }
      const tools = sandbox();
      if ('missing' in tools) throw new DomainError('unavailable', `exec is unavailable: ${tools.missing}.`, { code: 'sandbox_missing' });
      const timeoutSeconds = Number(args.timeout ?? settings.timeoutSeconds);
      if (timeoutSeconds > settings.maxTimeoutSeconds) throw new DomainError('invalid', `A timeout of ${timeoutSeconds} s is more than tools.exec.maxTimeoutSeconds (${settings.maxTimeoutSeconds}).`);
      const why = askReason(approval, command, settings.allow);
      if (why) {
        const { decision, id } = await deps.approvals.ask({
          command, caller: context.caller, agent: agentId ?? null, sessionKey: context.sessionKey ?? null, why, timeoutMs: settings.approvalTimeoutSeconds * 1000,
        });
        if (decision === 'rejected') throw new DomainError('forbidden', `An operator rejected the command (${id}).`, { code: 'exec_rejected' });
        if (decision === 'expired') throw new DomainError('forbidden', `Nobody approved the command within ${settings.approvalTimeoutSeconds} s (${id}); it did not run.`, { code: 'exec_expired' });
      }
      // Many calls at once add up: an agent, and a caller, run at most tools.exec.concurrency commands together.
      const place = running.take([`agent:${agentId ?? deps.workspaces.of()}`, `caller:${context.caller}`], settings.concurrency);
      if ('busy' in place) {
        throw rateLimited(1000, `${settings.concurrency} commands of this ${place.busy.startsWith('agent:') ? 'agent' : 'caller'} are running already (tools.exec.concurrency)`);
      }
      let lease: WorkspaceLease | undefined;
      try {
        const workspace = deps.workspaces.for(context);
        lease = await workspace.enter();
        const { bound } = lease;
        const root = await workspace.realRoot();
        // A file system of the workspace's own holds the bound by itself; a size is watched only where there is none, or
        // where the bound was lowered below the size the file system keeps.
        const bytes = settings.workspaceMB * MB;
        const watched = bound.by === 'watch' || bound.bytes > bytes;
        const binds = deps.skills ? await skillBinds(deps.skills, agentId, root) : [];
        const result = await run(command, root, {
          ...(binds.length ? { binds } : {}),
          timeoutMs: timeoutSeconds * 1000, cpuSeconds: settings.cpuSeconds, memoryBytes: settings.memoryMB * MB, processes: settings.processes,
          fileBytes: settings.fileMB * MB, tmpBytes: settings.tmpMB * MB, outputBytes: settings.outputBytes, network: settings.network, ...(watched ? { workspaceBytes: bytes } : {}),
        });
        context.logger.info({ caller: context.caller, exitCode: result.exitCode, signal: result.signal, timedOut: result.timedOut, stopped: result.stopped, ms: result.durationMs }, 'exec ran a command in the sandbox');
        const full = bound.by === 'filesystem' && !result.stopped && (await freeBytes(root) ?? Infinity) < FULL_BELOW;
        const note = stopNote(result, settings, timeoutSeconds) ?? (full ? `the workspace is full: its file system holds tools.exec.workspaceMB (${settings.workspaceMB} MB), and writes past it failed with "No space left on device"; remove files to make room` : undefined);
        return { ...result, ...(note ? { note } : {}) };
      } finally {
        lease?.leave();
        place.release();
      }
    },
  };
}
