/** Every bound of the WebSocket control plane, in one place. */
export const PROTOCOL_VERSION = 1;
export const MIN_PROTOCOL_VERSION = 1;

export const Limits = {
  /** A connection that has not completed `connect` by then is closed. */
  handshakeTimeoutMs: 10_000,
  /** Largest frame accepted before `connect` succeeds. */
  maxHandshakeFrameBytes: 64 * 1024,
  /** Largest frame accepted afterwards; larger frames close the connection with 1009. */
  maxFrameBytes: 1024 * 1024,
  /** Server `tick` events and ping frames keep idle connections alive and find dead ones. */
  tickIntervalMs: 30_000,
  /** A connection that misses this many pongs in a row is terminated. */
  maxMissedPongs: 2,
  /** Requests a connection may have in flight at once. */
  maxInFlightRequests: 64,
  /** Bytes the daemon holds for a client that does not read what it is sent; past this the connection is closed (1008). */
  maxQueuedBytes: 8 * 1024 * 1024,
  /** How far a signed timestamp may drift from the server clock. */
  maxClockSkewMs: 120_000,
  /** Default time a client waits for a response. */
  requestTimeoutMs: 15_000,
  /** A pending device pairing request expires after this long. */
  pairingRequestTtlMs: 5 * 60_000,
  /** Default and longest lifetime of a device invite code. */
  inviteDefaultTtlMs: 10 * 60_000,
  inviteMaxTtlMs: 7 * 24 * 60 * 60_000,
} as const;

/** WebSocket close codes the gateway uses. */
export const CloseCode = {
  normal: 1000,
  goingAway: 1001,
  policyViolation: 1008,
  tooLarge: 1009,
  internal: 1011,
} as const;
