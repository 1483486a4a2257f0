/**
 * What each RPC method answers: the shapes the daemon returns and the CLI
 * reads, declared once. Times are ISO 8601 strings.
 */
import type { ChannelState, SessionKind } from '../channels.ts';
import type { GatewayConfig } from '../config/types.ts';
import type { MethodName } from './methods.ts';

export interface HealthResult { ok: boolean; status: string }

export interface PluginSummary {
  loaded: string[];
  errors: { plugin: string; error: string }[];
  lastReload: BuildOutcome | null;
}

export interface StatusPayload {
  profile: string;
  state: 'running';
  readiness: 'starting' | 'ready' | 'stopping';
  pid: number;
  port: number;
  bind: string;
  host: string;
  url: string;
  version: string;
  instanceId: string;
  startedAt: number;
  uptimeMs: number;
  logFile: string;
  secretStore: string;
  authMode: string;
  connections: number;
  plugins: PluginSummary;
  /** Readiness checks that fail, by name, with the reason. */
  problems?: Record<string, string>;
  /** The daemon's memory in bytes: resident, and the JavaScript heap used and held. */
  memory: { rss: number; heapUsed: number; heapTotal: number; external: number };
}

export type ConfigGetResult =
  | { config: GatewayConfig; set: Record<string, unknown> }
  | { key: string; value: unknown; source: 'default' | 'config' };

export interface ConfigChange {
  key: string;
  value: unknown;
  previous: unknown;
  restartRequired: boolean;
  /** The change applies at the next `gateway reload`. */
  reloadRequired: boolean;
  /** Problems config.json still has after a change that mended one of them (it cannot be used until none is left). */
  remainingProblems?: string[];
}

/** Several keys changed at once: all written together, or (any problem) none. */
export interface ConfigPatchResult {
  changes: ConfigChange[];
  /** Nothing was written: the changes were only checked. */
  dryRun: boolean;
  restartRequired: boolean;
  reloadRequired: boolean;
}

/** A line of the daemon's log, as pino wrote it (level as a number: 10 trace .. 60 fatal). */
export interface LogEntry { level: number; time: string; msg: string; [field: string]: unknown }

export interface DeviceView {
  id: string; role: string; scopes: string[]; clientId: string | null; platform: string | null;
  pairedAt: string | null; pairedBy: string; lastSeenAt: string | null; lastAddress: string | null; rotatedAt: string | null;
}

export interface DevicePairingRequestView {
  requestId: string; deviceId: string; role: string; scopes: string[]; clientId: string | null; platform: string | null;
  address: string | null; viaProxy: boolean; createdAt: string | null; expiresAt: string | null;
}

/** Where the profile's state is kept, and with a shared store, who else uses it. */
export interface StoreStatus {
  backend: 'sqlite' | 'postgres';
  /** The SQLite file, or the PostgreSQL URL without its password. */
  location: string;
  schemaVersion: number;
  /** Schema versions of the modules' own tables. */
  modules: Record<string, number>;
  sizeBytes: number | null;
  /** This daemon's instance id. */
  self: string;
  /** The daemons attached to the store now (this one alone on SQLite). */
  daemons: { instanceId: string; profile: string; address: string | null; connectedAt: string | null }[];
  /** Work exactly one daemon does, and which one does it now (null: none at the moment). */
  singletons: { name: string; holder: string | null }[];
}

export interface AuditEvent {
  id: number; at: string; kind: string; actor: unknown; subject: unknown; address: unknown; detail: unknown;
}

export interface AccessTokenView {
  id: string;
  name: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
  /** The token this one was made with (POST /tokens with a token); null for one made with any other credential (the operator's, a JWT...). */
  parentId: string | null;
  /** The prefix and last four characters; never the token. */
  masked: string;
  /** A cap on what model calls made with it (and with the tokens made with it) cost, in models.currency; null for none. */
  budget: { daily?: number; monthly?: number } | null;
}

export interface TokenRevoked {
  id: string;
  revokedAt: string | null;
  /** The token had been revoked before; nothing changed. */
  alreadyRevoked: boolean;
  /** Tokens made with it, directly or not, revoked with it now. */
  descendantsRevoked: number;
}

export interface TokenCreated {
  id: string; name: string; scopes: string[]; createdAt: string; expiresAt: string; budget?: { daily?: number; monthly?: number } | null;
  /** Shown once. */
  token: string;
}

export const JOB_STATUSES = ['queued', 'running', 'succeeded', 'failed'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export interface Job {
  id: string;
  kind: string;
  status: JobStatus;
  attempts: number;
  maxAttempts: number;
  runAt: string;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  error: string | null;
  result: unknown;
  source: string | null;
}

export interface JobList { jobs: Job[]; nextCursor: string | null }

/** The figures an operator looks at first, read from the same series as GET /metrics (since the daemon started). */
export interface MetricsSummary {
  enabled: boolean;
  figures?: {
    http: { requests: number; serverErrors: number; p50Seconds: number | null; p99Seconds: number | null };
    inference: { calls: number; failed: number; inputTokens: number; outputTokens: number; firstTokenP50Seconds: number | null };
    jobs: { queued: number; running: number; failed: number; oldestQueuedAgeSeconds: number };
    webhooks: { deliveries: number; refused: number };
    channels: { accounts: number; connected: number; messagesIn: number; messagesOut: number };
    store: { statements: number; p99Seconds: number | null };
    process: { residentBytes: number; eventLoopLagP99Seconds: number | null };
  };
}

/** A command exec waits to run until an operator decides. */
/** A skill installed, or written by an agent and waiting for an operator. */
export interface SkillView {
  name: string;
  description: string;
  status: 'installed' | 'draft';
  files: number;
  bytes: number;
  /** Where it came from: a folder, an archive, a git address, or the agent that wrote it. */
  source: string;
  installedAt: string | null;
  /** The operator who approved it, or the agent that wrote it. */
  by?: string;
}

export interface ExecApprovalView {
  id: string;
  /** The short code a chat answers with ("approve 7f3a"): the id's first four digits. */
  code: string;
  command: string;
  /** Who asked: agent:<id>, or the HTTP or WebSocket caller. */
  caller: string;
  agent: string | null;
  sessionKey: string | null;
  /** Why it asks: the ask approval, or a command the allowlist does not cover. */
  why: string;
  requestedAt: string;
  expiresAt: string;
  status: 'pending' | 'approved' | 'rejected' | 'expired';
  /** Who answered: device:<id> (the CLI, the Control UI), or <channel>:<sender> from a chat. */
  decidedBy: string | null;
  /** Through what: cli, control-ui, or the channel; for an expired request, why it ended. */
  decidedVia: string | null;
  /** How each chat of approvals.notify was told of it (approvals.list only). */
  told?: ApprovalNoticeView[];
}

/** A chat told of an approval request: the message sent, waiting to be tried again, or given up; why, when it was not sent. */
export interface ApprovalNoticeView {
  channel: string;
  account: string;
  to: string;
  status: 'pending' | 'sent' | 'failed';
  error?: string;
}

/** One firing of an automation: its job's state, and what its run answered and where that went. */
export interface AutomationRun {
  /** The firing's key: the scheduled time, the delivery or the hook request that fired it, or a manual run. */
  key: string;
  /** What made it: its schedule, a catch-up after a stop, a webhook delivery, a hook request, or a manual run. */
  firedBy: 'schedule' | 'catch-up' | 'webhook' | 'hook' | 'manual';
  jobId: string;
  state: JobStatus;
  attempts: number;
  scheduledFor: string;
  firedAt: string | null;
  runId: string | null;
  text: string | null;
  usage: Record<string, number> | null;
  deliveredTo: string | null;
  error: string | null;
  /** Why it ran without acting (the automation was disabled or removed after it fired). */
  skipped: string | null;
}

export interface AutomationView {
  id: string;
  description: string | null;
  enabled: boolean;
  trigger: Record<string, unknown>;
  /** The trigger in a few words. */
  when: string;
  action: Record<string, unknown>;
  catchUp: 'skip' | 'last' | 'all';
  /** The next scheduled firing; null for event triggers, a disabled automation or a past `at`. */
  nextAt: string | null;
  last: AutomationRun | null;
}

export interface NodeView {
  deviceId: string; clientId: string; platform: string; address: string; caps: string[]; commands: string[];
  deniedCommands: string[]; permissions: Record<string, unknown>; connectedAt: string;
}

export interface ChannelStatus {
  channel: string;
  account: string;
  state: ChannelState;
  detail?: string;
  since: string;
}

export interface ChannelInfo {
  channel: string; label: string; installed: boolean; enabled: boolean; running: boolean; dmPolicy: string;
  allowFrom: string[]; approvedSenders: number; accounts: string[];
}

export interface DmPairingRequestView {
  channel: string; account: string; code: string; sender: string; senderName: string | null; createdAt: string | null; expiresAt: string | null;
}

export interface PairApproved extends DmPairingRequestView {
  approved: true;
  alreadyApproved: boolean;
  notified: boolean;
  notifyError?: string;
}

export interface AllowedSenderView {
  channel: string; sender: string; senderName: string | null; account: string | null; addedAt: string; addedBy: string; code: string | null;
}

export interface MessageView {
  id: number; direction: 'in' | 'out'; sender: string; senderName: string | null; text: string; at: string | null; via?: string;
  /** Who speaks: a person (user), the assistant, a tool's result (tool). */
  role: 'user' | 'assistant' | 'tool' | 'system';
  /** A turn of text, or a step of an agent run. */
  kind: 'message' | 'tool_call' | 'tool_result' | 'error' | 'summary';
  /** A step's facts: a tool call's id, name and arguments, a result, the model, usage and latency of an assistant turn. */
  data?: Record<string, unknown>;
  runId?: string;
  /** For a run's answer to a channel: how its reply stands in the outbox (sent with the platform's message ids, pending, failed). */
  delivery?: OutboxEntryView;
}

/** An image or file that came with a channel message (in the message's data.attachments). */
export interface AttachmentView {
  id: string;
  name: string;
  mimeType?: string;
  size?: number;
  /** Whether its bytes are kept for the agent; when not, note says why. */
  kept: boolean;
  note?: string;
  /** A voice note the platform marked as one (as against an audio file sent). */
  voice?: boolean;
  /** A voice note's or audio file's words, once heard (the person's words, spoken), with its length in seconds. */
  transcript?: string;
  seconds?: number;
  /** Why a voice note or audio file could not be heard, as a code (audio_too_long, bad_audio, no_words, ...); note says it in words. */
  unheard?: string;
}

/** A reply in a channel's outbox. */
export interface OutboxEntryView {
  id: number; channel: string; account: string; to: string;
  /** A reaction put on a message, or a file sent (a text message when left out). */
  kind?: 'reaction' | 'file';
  status: 'pending' | 'sent' | 'failed';
  attempts: number;
  runId?: string;
  createdAt: string; sentAt: string | null;
  /** When the next try is due, while it is pending. */
  nextAttemptAt: string | null;
  /** The platform's ids of the messages it took. */
  receipts: string[];
  /** Why the last try failed. */
  error?: string;
  /** The reply was spoken too: its voice note goes (or went) after the text. */
  voice?: true;
}

export interface SessionView {
  key: string; channel: string; account: string; kind: SessionKind; peer: string; peerName: string | null;
  createdAt: string | null; updatedAt: string | null; messageCount: number; lastMessage?: MessageView;
}

export interface ToolCatalogEntry {
  name: string; description: string; inputSchema: Record<string, unknown>; dangerous: boolean;
  /** The module or plugin that registered it. */
  plugin: string;
  overHttp: boolean;
}

/** Where an MCP server stands: connecting, connected, needs-login (an interactive login is needed), error (with the reason), disabled. */
export type McpState = 'connecting' | 'connected' | 'needs-login' | 'error' | 'disabled';

export interface McpServerInfo {
  name: string;
  url: string;
  state: McpState;
  /** Why it is not connected, or what to do. Never a secret. */
  reason?: string;
  /** How many of its tools the gateway offers. */
  tools: number;
  /** Tools left out because their names do not fit the gateway's (mcp.<name>.<tool>, 64 characters). */
  skippedTools?: string[];
  /** How the gateway authenticates to it. */
  auth: 'oauth' | 'headers' | 'none';
  tokenExpiresAt?: number;
  tokenReceivedAt?: number;
  refreshable?: boolean;
  connectedAt?: number;
}

export interface McpToolInfo {
  /** The gateway's name of the tool: mcp.<server>.<tool>. */
  name: string;
  /** The server's own name of the tool. */
  tool: string;
  description: string;
  inputSchema: Record<string, unknown>;
  /** Whether HTTP callers and agents may call it (gateway.tools.allow names it). */
  overHttp: boolean;
}

export interface ToolAnswer { ok: true; result: unknown; dryRun?: true; replayed?: true }

export interface Registered {
  routes: string[]; wsRoutes: string[]; methods: string[]; tools: string[]; channels: string[]; jobKinds: string[];
}

export interface PluginInfo {
  name: string;
  source: string;
  builtin: boolean;
  status: 'loaded' | 'error';
  error?: string;
  registered: Registered;
}

export interface BuildOutcome {
  ok: boolean;
  at: string;
  generation: number;
  errors: { plugin: string; error: string }[];
}

export interface ReloadResult {
  ok: boolean;
  pid: number;
  config: { ok: boolean; error?: string };
  plugins: BuildOutcome;
}

export interface ModelInfo { id: string; provider: string; kind: 'chat' | 'embedding'; alias?: string }

export interface ProviderInfo {
  id: string; kind: string | null; baseUrl: string | null; models: string[]; embeddingModels: string[];
  /** Whether the secret models.providers.<id>.apiKey is set (never its value). */
  apiKey: 'set' | 'not set';
}

export interface UsageGroup {
  key: string;
  calls: number;
  errors: number;
  inputTokens: number;
  outputTokens: number;
  /** Calls whose provider did not say how many tokens they used. */
  uncounted: number;
  latencyMsAvg: number;
  /** What the calls cost, in the summary's currency (calls whose price is unknown count nothing: see unpriced). */
  cost: number;
  /** Calls with usage whose model has no known price. */
  unpriced: number;
}

export interface UsageSummary {
  since: string;
  total: UsageGroup;
  byAgent: UsageGroup[];
  byModel: UsageGroup[];
  bySubject: UsageGroup[];
  bySurface: UsageGroup[];
  byAutomation: UsageGroup[];
  byChannel: UsageGroup[];
  byPerson: UsageGroup[];
  /** What the runs each agent delegated to others spent (agents.delegate): counted to the child in byAgent, and to the delegating agent here. */
  byDelegator: UsageGroup[];
  /** The currency of every cost (models.currency). */
  currency: string;
}

export interface AgentInfo {
  id: string; model: string | null; fallbacks: string[]; tools: string[]; maxSteps: number; queue: string; default: boolean;
  /** Skills it may use (agents.<id>.skills: names, or "*"). */
  skills: string[];
  /** Whom it answers on channels: routes naming it (order: their place in channels.<id>.routes), and channels it answers for everyone else (order null). */
  routes: { channel: string; order: number | null; match: { account?: string; peer?: string; room?: string } }[];
  /** Agents it may hand tasks to (agents.<id>.delegation.agents). */
  delegatesTo: string[];
}

export interface RunUsage { inputTokens?: number; outputTokens?: number }

/** A task one agent handed to another (agents.delegate): the child's session, how it stands, its answer or failure. */
export interface DelegationView {
  /** The child's session: delegate:<parent session>:<n>. */
  sessionKey: string;
  parentSession: string;
  parentAgent: string;
  agent: string;
  /** 1 for a child of a run that was not delegated itself, 2 for its child, ... */
  depth: number;
  task: string;
  /** Whether the parent's tool call waits for the answer (else it comes as a new turn). */
  wait: boolean;
  status: 'running' | 'succeeded' | 'failed';
  jobId: string;
  runId: string | null;
  answer: string | null;
  error: string | null;
  usage: RunUsage;
  createdAt: string;
  finishedAt: string | null;
  /** When the answer (or failure) reached the parent: the waiting call, or its conversation as a new turn. */
  deliveredAt: string | null;
}

/** A delegation with those its child made in turn. */
export type DelegationNode = DelegationView & { children: DelegationNode[] };

/** Where a session stands among delegations: the one that made it (a child's session), and those it made. */
export interface SessionDelegations { parent: DelegationView | null; children: DelegationNode[] }

/** How an agent run ended. */
export interface RunResult {
  runId: string;
  agent: string;
  sessionKey: string;
  /** waiting: the run asked its person a question (ask) and ended there; a new run of the session resumes with the answer. */
  status: 'succeeded' | 'failed' | 'aborted' | 'interrupted' | 'waiting';
  text: string;
  model: string | null;
  usage: RunUsage;
  steps: number;
  toolCalls: { id: string; name: string; args: unknown; result?: unknown; error?: string }[];
  latencyMs: number;
  error?: string;
}

/** What each method answers. */
export interface MethodResults {
  health: HealthResult;
  status: StatusPayload;
  'config.get': ConfigGetResult;
  'config.set': ConfigChange;
  'config.unset': ConfigChange;
  'secrets.changed': { name: string; applied: boolean };
  shutdown: { stopping: true; pid: number };
  /** The restart was handed to `via` (systemctl or gateway restart); this process stops soon after the answer. */
  restart: { restarting: true; pid: number; via: string };
  'devices.list': { paired: DeviceView[]; pending: DevicePairingRequestView[] };
  'devices.approve': { approved: true; requestId: string; device: DeviceView };
  'devices.reject': { rejected: true; requestId: string; deviceId: string };
  'devices.revoke': { revoked: true; deviceId: string; closedConnections: number };
  'devices.rotate': { rotated: true; deviceId: string; deviceToken: string; closedConnections: number };
  'devices.invite': { code: string; expiresAt: string };
  'audit.list': { events: AuditEvent[] };
  'store.status': StoreStatus;
  'tokens.create': TokenCreated;
  'tokens.list': { tokens: AccessTokenView[]; more: boolean };
  'tokens.revoke': TokenRevoked;
  'jobs.list': JobList;
  'jobs.get': Job;
  'jobs.retry': Job;
  /** A page of automations by id; nextCursor continues after the last one, null at the end. Long prompts are cut (automations.get has them whole). */
  'skills.upload': { upload: string; files: number; bytes: number };
  'skills.install': SkillView;
  'skills.list': { skills: SkillView[]; drafts: SkillView[] };
  'skills.show': SkillView & { instructions: string; license?: string; compatibility?: string; allowedTools?: string; entries: { path: string; size: number; executable: boolean }[]; agents: string[] };
  'skills.remove': { name: string; removed: boolean };
  'skills.approve': SkillView;
  'approvals.list': { approvals: ExecApprovalView[] };
  'approvals.decide': ExecApprovalView;
  'automations.list': { automations: AutomationView[]; nextCursor: string | null };
  'automations.get': AutomationView;
  'automations.runs': { automation: string; runs: AutomationRun[] };
  'automations.run': { automation: string; key: string; jobId: string };
  'metrics.summary': MetricsSummary;
  'nodes.list': { nodes: NodeView[] };
  'nodes.invoke': { node: string; command: string; result: unknown };
  'node.invoke.result': { accepted: true };
  'channels.list': { channels: ChannelInfo[] };
  'channels.status': { channels: ChannelStatus[] };
  'pair.list': { requests: DmPairingRequestView[] };
  'pair.approve': PairApproved;
  'pair.reject': { rejected: true } & DmPairingRequestView;
  'pair.revoke': { revoked: true; channel: string; sender: string };
  'pair.allowed': { senders: AllowedSenderView[] };
  'sessions.list': { sessions: SessionView[] };
  'sessions.history': { session: SessionView; messages: MessageView[]; delegation?: SessionDelegations };
  /** sent: the platform took it; else it waits in the outbox (delivery says why and when it is tried again). */
  'message.send': { sent: boolean; sessionKey: string; message: MessageView; delivery: OutboxEntryView };
  'message.react': { reacted: boolean; sessionKey: string; delivery: OutboxEntryView };
  reload: ReloadResult;
  'plugins.list': { plugins: PluginInfo[]; lastReload: BuildOutcome | null };
  'tools.catalog': { tools: ToolCatalogEntry[] };
  /** The overlay publication in force: how and where the tailnet reaches the gateway; null when off. */
  /** The name the gateway is announced under on the local network; null when it is not. */
  'discovery.status': { name: string | null };
  'overlay.status': { overlay: { mode: 'serve' | 'funnel'; url: string } | null };
  'tools.invoke': ToolAnswer;
  'mcp.list': { servers: McpServerInfo[] };
  'mcp.tools': { server: McpServerInfo; tools: McpToolInfo[] };
  /** A login started: where to send the browser; or, when the server needs none, connected already. */
  'mcp.login': { server: McpServerInfo; authorizationUrl?: string; callbackUrl: string };
  'mcp.logout': { server: McpServerInfo };
  'models.list': { providers: ProviderInfo[]; models: ModelInfo[]; aliases: Record<string, string> };
  'usage.summary': UsageSummary;
  'agents.list': { agents: AgentInfo[] };
  'agent.run': RunResult;
  'agent.abort': { aborted: number };
  'logs.tail': { entries: LogEntry[]; source: 'file' | 'memory' };
  'logs.follow': { following: true };
  'logs.unfollow': { following: false };
  'config.schema': { schema: Record<string, unknown>; liveKeys: string[]; reloadKeys: string[]; readOnlyKeys: string[] };
  'config.patch': ConfigPatchResult;
}

export type MethodResult<M extends MethodName> = M extends keyof MethodResults ? MethodResults[M] : never;
