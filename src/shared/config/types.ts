import type { AuthMode, BindMode, ExecApproval, LogLevel, MemoryScope, ProviderKind, QueueMode, SearchProvider, SecretBackendName, ToolProfile, VoiceKind } from './schema.ts';

export interface ProviderSettings {
  kind?: ProviderKind;
  baseUrl?: string;
  headers?: Record<string, string>;
  models: string[];
  embeddingModels: string[];
  imageModels: string[];
  timeouts: { totalMs: number; firstTokenMs: number; stallMs: number };
  retries: { max: number; baseDelayMs: number; maxDelayMs: number };
  fallbackOn: number[];
  prices?: Record<string, ModelPrice>;
}

/** A model's price per million tokens, in models.currency. */
export interface ModelPrice {
  input: number;
  output: number;
  cachedInput?: number;
}

/** A cap on spending, in models.currency. */
export interface Budget {
  daily?: number;
  monthly?: number;
}

export interface AgentSettings {
  model?: string;
  fallbacks: string[];
  instructions: string;
  tools: string[];
  maxSteps: number;
  temperature?: number;
  maxOutputTokens?: number;
  toolChoice: 'auto' | 'none' | 'required';
  queue: QueueMode;
  history: number;
  contextTokens?: number;
  clientTools: boolean;
  models: string[];
  toolProfile?: ToolProfile;
  workspace?: string;
  exec: { approval?: ExecApproval };
  skills?: string[];
  budget?: Budget;
  memory: { scope: MemoryScope };
  /** Absent only for a bare model called as an agent, which delegates to no one. */
  delegation?: { agents: string[]; depth: number; maxChildren: number; timeoutSeconds: number; allowSharedMemory: boolean };
}

/** A route of channels.<id>.routes: who a message comes from, and the agent that answers it. */
export interface ChannelRoute {
  match: { account?: string; peer?: string; room?: string };
  agent: string;
}

export interface AutomationTrigger {
  cron?: string;
  tz?: string;
  every?: string;
  at?: string;
  webhook?: { event: string; action?: string; repository?: string; ref?: string };
  hook?: string;
}

export interface AutomationDelivery {
  channel: string;
  account?: string;
  to: string;
}

export interface AutomationAction {
  agent?: string;
  prompt?: string;
  session?: string;
  deliver?: 'session' | AutomationDelivery;
  message?: AutomationDelivery & { text: string };
}

export interface AutomationSettings {
  description?: string;
  enabled: boolean;
  budget?: Budget;
  trigger: AutomationTrigger;
  action: AutomationAction;
  catchUp: 'skip' | 'last' | 'all';
}

export interface McpServerSettings {
  url: string;
  enabled: boolean;
  headers: string[];
  clientId?: string;
  clientMetadataUrl?: string;
  scope?: string;
  timeoutMs: number;
}

/** The effective configuration of a profile: what `config.json` holds, with every default filled in. */
/** The voice engines: speech to text and text to speech. */
export interface VoiceSettings {
  transcribe: { kind: VoiceKind; baseUrl?: string; model?: string; language?: string; command: string[]; paths: string[]; timeoutSeconds: number };
  speak: { kind: VoiceKind; baseUrl?: string; model?: string; voice?: string; command: string[]; paths: string[]; timeoutSeconds: number; maxChars: number };
  maxSeconds: number;
  maxMB: number;
  concurrency: number;
}

export interface GatewayConfig {
  gateway: {
    port?: number;
    bind: BindMode;
    customBindHost?: string;
    auth: {
      mode: AuthMode;
      allowOverlay: boolean;
      trustedProxy: { userHeader: string; requiredHeaders: string[]; allowUsers: string[] };
      rateLimit: { maxFailures: number; windowMs: number; lockoutMs: number; exemptLoopback: boolean };
    };
    trustedProxies: string[];
    overlay: { mode: 'off' | 'serve' | 'funnel' };
    controlUi: { enabled: boolean; basePath: string; allowedOrigins: string[] };
    http: { maxBodyBytes: number; endpoints: Record<'chatCompletions' | 'responses' | 'models' | 'embeddings' | 'audio', { enabled: boolean }> };
    rateLimit: { windowMs: number; max: number; webhooksMax: number };
    tools: { allow: string[]; deny: string[] };
    nodes: { allowCommands: string[]; denyCommands: string[] };
    discovery: { mdns: { enabled?: boolean } };
    drainTimeoutMs: number;
  };
  hooks: {
    enabled: boolean;
    path: string;
    maxBodyBytes: number;
    defaultSessionKey?: string;
    allowedSessionKeyPrefixes: string[];
    presets: string[];
    mappings: { name: string; match?: { field: string; equals?: unknown }; action: 'job' | 'message' | 'wake'; kind?: string; channel?: string; to?: string; sessionKey?: string; text?: string }[];
  };
  channels: Record<string, Record<string, unknown> & { enabled: boolean; dmPolicy: string; allowFrom: string[] }>;
  secrets: { backend?: SecretBackendName };
  store: { url?: string; synchronous: 'normal' | 'full'; retentionDays: number; connections: number };
  jobs: { concurrency: number; leaseSeconds: number };
  api: { jwt: { issuer?: string; audience?: string; jwksUrl?: string }; tokens: { defaultExpiryDays: number } };
  models: { providers: Record<string, ProviderSettings>; aliases: Record<string, string>; currency: string };
  agents: Record<string, AgentSettings>;
  tools: {
    web: {
      allowPrivate: string[]; maxBytes: number; timeoutMs: number; maxRedirects: number;
      search: { provider?: SearchProvider; baseUrl?: string; count: number; timeoutMs: number };
    };
    browser: { executablePath?: string; pages: number; browsers: number; actionTimeoutSeconds: number; idleSeconds: number; memoryMB: number; downloadMB: number };
    exec: {
      approval: ExecApproval; allow: string[]; network: boolean; timeoutSeconds: number; maxTimeoutSeconds: number; cpuSeconds: number; memoryMB: number;
      processes: number; outputBytes: number; fileMB: number; workspaceMB: number; workspaceImage: 'auto' | 'off'; concurrency: number; tmpMB: number; approvalTimeoutSeconds: number;
    };
    ask: { timeoutSeconds: number };
  };
  approvals: { notify: { channel: string; account?: string; to: string }[]; approvers: string[] };
  automations: Record<string, AutomationSettings>;
  runtime: { defaultAgent?: string; concurrency: number; toolRunConcurrency: number; senderLimit: { max: number; windowMs: number } };
  voice: VoiceSettings;
  metrics: { enabled: boolean; loopbackOpen: boolean };
  telemetry: { otlp: { endpoint?: string; serviceName: string } };
  inference: {
    limits: { requestsPerMinute: number; tokensPerMinute: number; monthlyTokens?: number };
    keepaliveMs: number;
    maxBodyBytes: number;
  };
  mcp: { servers: Record<string, McpServerSettings>; callbackUrl?: string };
  plugins: { load: string[]; canvas: { root?: string }; a2ui: { root?: string } };
  log: { level: LogLevel; maxBytes: number; maxFiles: number };
}
