import type { ErrorCode } from './error-codes.ts';
import { parseJsonWithin } from '../json.ts';
import type { Role } from './scopes.ts';

/** Text JSON frames of the control plane. */
export interface RequestFrame<P = unknown> {
  type: 'req';
  id: string;
  method: string;
  params?: P;
}

export interface ErrorShape {
  code: ErrorCode;
  message: string;
  details?: Record<string, unknown>;
  retryable?: boolean;
}

export interface ResponseFrame<T = unknown> {
  type: 'res';
  id: string;
  ok: boolean;
  payload?: T;
  error?: ErrorShape;
}

export interface EventFrame<T = unknown> {
  type: 'event';
  event: string;
  payload?: T;
  seq?: number;
}

export type Frame = RequestFrame | ResponseFrame | EventFrame;

export interface ChallengePayload {
  nonce: string;
  ts: number;
}

export interface ClientInfo {
  id: string;
  version: string;
  platform: string;
  mode: string;
}

/** Signed device identity; verified by the trust layer. */
export interface DeviceIdentity {
  id: string;
  publicKey: string;
  signature: string;
  signedAt: number;
  nonce: string;
}

export interface ConnectAuth {
  token?: string;
  password?: string;
  deviceToken?: string;
  inviteCode?: string;
}

export interface ConnectParams {
  minProtocol: number;
  maxProtocol: number;
  client: ClientInfo;
  role: Role;
  scopes: string[];
  caps?: string[];
  commands?: string[];
  permissions?: Record<string, unknown>;
  auth: ConnectAuth;
  device?: DeviceIdentity;
}

export interface HelloOk {
  type: 'hello-ok';
  protocol: number;
  server: { version: string; instanceId: string; profile: string };
  role: Role;
  scopes: string[];
  device: { id: string };
  /** Given once, when the device receives its token; the client stores it. */
  deviceToken?: string;
  limits: { maxFrameBytes: number; tickIntervalMs: number };
}

/** Parses a text frame; undefined when it is not a well-formed frame object. */
export function parseFrame(text: string): Frame | undefined {
  let value: unknown;
  try {
    // Frames nest little; a deep one is refused here, before anything walks it.
    value = parseJsonWithin(text);
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const frame = value as Record<string, unknown>;
  switch (frame.type) {
    case 'req':
      return typeof frame.id === 'string' && frame.id.length > 0 && frame.id.length <= 128 && typeof frame.method === 'string'
        ? (frame as unknown as RequestFrame) : undefined;
    case 'res':
      return typeof frame.id === 'string' && typeof frame.ok === 'boolean' ? (frame as unknown as ResponseFrame) : undefined;
    case 'event':
      return typeof frame.event === 'string' ? (frame as unknown as EventFrame) : undefined;
    default:
      return undefined;
  }
}
