/** What the gateway says to a model and hears back, in its own types: the adapter turns them into a provider's. */
import type { ProviderKind } from '../../shared/config/schema.ts';

export interface ToolCallRecord {
  id: string;
  name: string;
  args: unknown;
}

/** Part of what a person said: text, or an image they sent (given to models that take images, else named). */
export type UserPart =
  | { type: 'text'; text: string }
  | { type: 'image'; name: string; mimeType: string; data: Uint8Array };

/** A conversation as the gateway keeps it. */
export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string | UserPart[] }
  | { role: 'assistant'; content: string; toolCalls?: ToolCallRecord[] }
  | { role: 'tool'; toolCallId: string; toolName: string; content: unknown; isError?: boolean };

export interface ToolSpec {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

export interface Usage {
  /** Tokens read and written as the provider counted them; undefined when it did not say (never guessed as 0). */
  inputTokens?: number;
  outputTokens?: number;
  /** Of the input tokens, those the provider read from its cache (priced lower by most). */
  cachedInputTokens?: number;
}

export interface StepRequest {
  system?: string;
  messages: ChatMessage[];
  tools?: ToolSpec[];
  toolChoice?: ToolChoice;
  temperature?: number;
  maxOutputTokens?: number;
  signal: AbortSignal;
  /** Called when the request is on its way to the provider (work the answer does not need can wait for it). */
  onSent?: () => void;
}

export type StepEvent =
  | { type: 'text'; text: string }
  | { type: 'tool-call'; call: ToolCallRecord }
  | { type: 'finish'; finishReason: string; usage: Usage };

/** How to reach one model of one provider. */
export interface ModelConnection {
  kind: ProviderKind;
  baseUrl?: string;
  apiKey?: string;
  headers?: Record<string, string>;
  model: string;
  /** The fetch the provider uses (the caller's, which watches the bytes for activity); the same for every call. */
  fetch: typeof globalThis.fetch;
}
