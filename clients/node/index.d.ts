// Type declarations of herald-client: the producer, the consumer, their options, acks and deliveries.

import type { ConnectionOptions } from 'node:tls';

/** A refused request (the server's `error`) or a failed connection (`connection_lost`, `client_closed`). */
export class HeraldError extends Error {
  readonly name: 'HeraldError';
  /** Stable snake_case code: the server's (docs/errors.md, "Every error code") or the client's. */
  readonly code: string;
  /** What happened, specifically. */
  readonly title: string;
  /** Why, and what to change. */
  readonly detail: string;
  /** The op of the request it answers, when known. */
  readonly op?: string;
  readonly rid?: unknown;
  /** `not_owner`: the partition owner's address (host:port), when the server names it. */
  readonly owner?: string;
  constructor(code: string, title: string, detail?: string, extra?: { op?: string; rid?: unknown; owner?: string });
}

/** A warning on an accepted request. Servers sending `{code, message}` get `title` = `message`. */
export interface Warning {
  code: string;
  title: string;
  detail: string;
  /** The whole text (`message` as sent, else title and detail). */
  message: string;
}

/** A durable consumer's position in one partition. */
export interface ConsumerPartition { partition: number; acked: number; head: number; lag: number; }

/** One durable consumer as `consumers` lists it. */
export interface ConsumerStatus {
  consumer: string;
  partitions: ConsumerPartition[];
  lag: number;
  /** null: no filter. */
  filter: { apps?: string[]; kinds?: string[] } | null;
  /** Its group's live connections, newest first (`member`, `partitions`, and on one instance `connection`, `peer`, `generation`, …). */
  members: Array<{ member: string; partitions: number[]; [field: string]: unknown }>;
  ackedAt?: string;
  createdAt?: string;
}

export interface ConsumersReply extends Ack { op: 'consumers'; consumers: ConsumerStatus[]; ephemeral: Array<Record<string, unknown>>; }

export interface DeleteConsumerReply extends Ack { op: 'deleteConsumer'; consumer: string; acked: number; closedConnections: number; }

/** The reply to a successful request. */
export interface Ack {
  /** The partition of the event (0 with one partition). */
  partition: number;
  /** The event's position in its partition's log (absent for ping and stats). */
  seq: number;
  /** True when a submit's (app, id) was stored before: nothing new was stored. */
  duplicate: boolean;
  warnings: Warning[];
  /** Fan-out: recipients, and how many events were stored now. */
  events?: number;
  appended?: number;
  /** Any other member the server sent (`op`, `now`, `deliveryHead`, stats counters, …). */
  [member: string]: unknown;
}

export interface ClockAck extends Ack { now: string; deliveryHead: number }
/** Where a partition is served: its owner's address (host:port) and lease epoch. */
export interface Route { partition: number; address: string; epoch: number }
export interface HelloReply {
  ok: true; op: 'hello'; roles: string[]; apps: string[]; server: string;
  /** The instance that answered, the number of partitions P, the partition function ("fnv1a64") and each partition's owner. */
  instance?: string; partitions?: number; hash?: string; routes?: Route[];
  [member: string]: unknown;
}

export interface ReconnectOptions {
  /** First delay before reconnecting, doubled up to maxMs (with jitter). Default 50. */
  initialMs?: number;
  /** Default 2000. */
  maxMs?: number;
  /** Attempts before pending calls reject with `connection_lost`. Default Infinity. */
  maxAttempts?: number;
}

export interface ConnectionOptionsBase {
  /** "host:port"; or host and port. Default 127.0.0.1:7411. */
  address?: string;
  host?: string;
  port?: number;
  /** TLS: true, or node:tls connect options (ca, cert, key, servername, …). */
  tls?: boolean | ConnectionOptions;
  /** Sent in hello; leave out in dev mode. */
  token?: string;
  connectTimeoutMs?: number;
  /** Sends a ping when nothing was written for this long (the server closes idle connections after 5 minutes). Default 60000; 0 turns it off. */
  keepAliveMs?: number;
  /** false: never reconnect. */
  reconnect?: ReconnectOptions | false;
}

export interface ClientOptions extends ConnectionOptionsBase {
  /** Requests in flight on the connection at most; more calls wait in the client. Default 1024. */
  window?: number;
  /** Send each user's requests to its partition's owner when hello's routes name owners elsewhere. Default true. */
  routing?: boolean;
}

export type Instant = string;
export type InterruptionLevel = 'passive' | 'active' | 'timeSensitive' | 'critical';

export interface Action { id?: string; title: string; destructive?: boolean; icon?: string }

export interface Submit {
  id: string;
  app: string;
  user?: string;
  users?: string[];
  interruptionLevel?: InterruptionLevel;
  title?: string;
  subtitle?: string;
  body?: string;
  hiddenPreviewsBodyPlaceholder?: string;
  threadId?: string;
  collapseId?: string;
  relevanceScore?: number;
  sound?: string;
  actions?: Action[];
  communication?: { sender: string; group?: string };
  marketing?: boolean;
  deliverAt?: Instant;
  expiresAt?: Instant;
  relevantAt?: Instant;
  data?: Record<string, unknown>;
}

export interface Withdraw { app: string; id: string; user?: string }
export type AuthorizationStatus = 'notDetermined' | 'denied' | 'authorized' | 'provisional';
export interface Authorization { user: string; app: string; status: AuthorizationStatus; options?: ('alert' | 'sound' | 'badge' | 'criticalAlert')[] }
export interface Settings {
  user: string;
  app?: string;
  alert?: boolean; sound?: boolean; badge?: boolean; lockScreen?: boolean; notificationCenter?: boolean;
  timeSensitive?: boolean; marketingConsent?: boolean; delivery?: 'immediate' | 'summary';
  allowNotifications?: boolean; showPreviews?: 'always' | 'whenUnlocked' | 'never'; attentionBudget?: number | null;
}
export interface ProvisionalKeep { user: string; app: string; delivery?: 'immediate' | 'summary' }
export interface ProvisionalTurnOff { user: string; app: string }
export interface SummarySchedule { user: string; times: string[]; timeZone: string }
export interface FocusWindow { days: number[]; start: string; end: string }
export interface FocusDefine {
  user: string; focus: string; allowedPeople?: string[]; allowedApps?: string[];
  allowTimeSensitive?: boolean; schedule?: FocusWindow[]; timeZone?: string;
}
export interface FocusOn { user: string; focus: string; until?: Instant }
export interface FocusOff { user: string; focus: string }
export interface Mute { user: string; app: string; until: Instant }
export interface Snooze { user: string; app: string; id: string; until: Instant }
export interface Opened { user: string; app: string; id?: string }
export interface BadgeClear { user: string; app: string }
export interface RegisterApp { app: string; entitlements?: ('communication' | 'critical' | 'government')[] }
export interface Clock { advanceTo: Instant }

export type DeliveryKind = 'alert' | 'quiet' | 'queued' | 'held' | 'summary' | 'focusDigest' | 'suppressed' | 'expired' | 'replaced' | 'withdrawn' | 'cleared';

export interface Presentation {
  banner: boolean; sound: boolean; lockScreen: boolean; notificationCenter: boolean; overrideSilent: boolean;
  badge?: number;
}

export interface Content {
  title?: string; subtitle?: string; body?: string; actions?: Action[];
  communication?: { sender: string; group?: string }; data?: Record<string, unknown>;
  interruptionLevel?: InterruptionLevel; relevanceScore?: number; sound?: string; threadId?: string;
  hiddenPreviewsBodyPlaceholder?: string;
}

export interface SummaryItem { app: string; notification: string; content: Content; threadId?: string; relevanceScore?: number }

/** One delivery line (docs/protocol.md, "The delivery line"). */
export interface Delivery {
  op: 'delivery';
  /** The partition (0 with one partition). */
  partition: number;
  cursor: number;
  kind: DeliveryKind;
  user: string;
  at: Instant;
  reason: string;
  rulesVersion: string;
  causeSeq: number;
  app?: string;
  notification?: string;
  presentation?: Presentation;
  content?: Content;
  items?: SummaryItem[];
  summaryAt?: Instant;
  focus?: string;
  replaces?: string;
  provisional?: true;
  timeSensitiveIntro?: true;
  snoozed?: true;
  part?: number;
  parts?: number;
  [member: string]: unknown;
}

export interface SubscribeOptions {
  /** The durable name that keys the acknowledged cursor. */
  consumer: string;
  /** "committed" (default: after the last ack; a new name starts at the head), "earliest", or a cursor. */
  from?: 'committed' | 'earliest' | number;
  /** Only these apps and kinds are yielded; the others still advance the cursor. */
  filter?: { apps?: string[]; kinds?: DeliveryKind[] };
  /** Each delivery counts as processed when the next is asked for (default true); false: call ack(). */
  autoAck?: boolean;
  /** Ack after this many processed lines (default 256)… */
  ackEvery?: number;
  /** …or this many milliseconds after the first unacked one (default 200), and on close. */
  ackIntervalMs?: number;
  /** Deliveries buffered before the socket is paused (default 4096). */
  highWaterMark?: number;
}

export class Subscription implements AsyncIterableIterator<Delivery> {
  constructor(options: SubscribeOptions & ConnectionOptionsBase);
  readonly consumer: string;
  /** The cursor the stream started after (known once ready() resolves). */
  readonly startCursor: number | null;
  /** The newest cursor received, processed, and confirmed as acknowledged, of partition 0 (a one-partition server's only one). */
  readonly receivedCursor: number | null;
  readonly processedCursor: number | null;
  readonly ackedCursor: number | null;
  /** The newest cursor the server confirmed as acknowledged, per partition. */
  readonly acknowledged: Record<number, number>;
  readonly reconnects: number;
  /** Resolves with the starting cursor once subscribed; rejects with the HeraldError that refused it. */
  ready(): Promise<number>;
  next(): Promise<IteratorResult<Delivery>>;
  return(): Promise<IteratorResult<Delivery>>;
  [Symbol.asyncIterator](): Subscription;
  /** Marks a delivery (or a cursor of `partition`, default 0) processed; acked in the next batch, naming its partition. */
  ack(cursor: number | Delivery, partition?: number): void;
  /** Acks what was processed, waits for the reply, closes. */
  close(): Promise<void>;
}

export class HeraldClient {
  /** Connects and says hello; rejects with HeraldError (e.g. `invalid_token`) or the socket's error. */
  static connect(options?: ClientOptions): Promise<HeraldClient>;
  constructor(options?: ClientOptions);
  readonly options: Required<Omit<ClientOptions, 'tls' | 'token' | 'address'>> & ClientOptions;
  /** The granted hello reply of the current connection. */
  readonly hello: HelloReply | null;
  readonly reconnects: number;
  readonly inFlight: number;
  readonly queued: number;
  /** The routing table of the latest hello. */
  readonly routes: RoutingTable;
  /** How many requests were sent again after a `not_owner` refusal. */
  readonly notOwnerResends: number;
  /** Says hello again to the instance connected to: the latest routes. */
  refreshRoutes(): Promise<HelloReply>;
  connect(): Promise<HelloReply>;
  /** Resolves when fewer than `window` requests are queued or in flight. */
  whenWritable(): Promise<void>;
  request(op: string, fields?: Record<string, unknown>): Promise<Ack>;
  submit(notification: Submit): Promise<Ack>;
  withdraw(fields: Withdraw): Promise<Ack>;
  authorization(fields: Authorization): Promise<Ack>;
  settings(fields: Settings): Promise<Ack>;
  provisionalKeep(fields: ProvisionalKeep): Promise<Ack>;
  provisionalTurnOff(fields: ProvisionalTurnOff): Promise<Ack>;
  summarySchedule(fields: SummarySchedule): Promise<Ack>;
  focusDefine(fields: FocusDefine): Promise<Ack>;
  focusOn(fields: FocusOn): Promise<Ack>;
  focusOff(fields: FocusOff): Promise<Ack>;
  mute(fields: Mute): Promise<Ack>;
  snooze(fields: Snooze): Promise<Ack>;
  opened(fields: Opened): Promise<Ack>;
  badgeClear(fields: BadgeClear): Promise<Ack>;
  registerApp(fields: RegisterApp): Promise<Ack>;
  clock(fields: Clock | Instant | Date): Promise<ClockAck>;
  /** Admin: erases the user's stored notification content (SPEC §14); the ack carries the erasure event's seq. */
  erase(user: string | { user: string }): Promise<Ack>;
  /** Admin: every durable consumer, then the ephemeral streams. */
  consumers(): Promise<ConsumersReply>;
  /** Admin: closes the consumer's connections and removes its cursors; rejects with `unknown_consumer` for an unknown name. */
  deleteConsumer(consumer: string | { consumer: string }): Promise<DeleteConsumerReply>;
  ping(): Promise<Ack & { op: 'pong' }>;
  stats(): Promise<Ack & { op: 'stats' }>;
  /** A consumer on a connection of its own, with this client's address, TLS and token. */
  subscribe(options: SubscribeOptions & Partial<ConnectionOptionsBase>): Subscription;
  /** Waits for every call made so far to be answered, then closes. */
  close(): Promise<void>;
  /** Closes at once: unanswered calls reject with `client_closed`. */
  destroy(): void;
}

/** A consumer on a connection of its own. */
export function subscribe(options: SubscribeOptions & ConnectionOptionsBase): Subscription;
export function parseAddress(address: string, defaultPort?: number): { host: string; port: number };
export function normalizeWarning(warning: unknown): Warning;

/** FNV-1a 64 of a string's UTF-8 bytes (or of bytes). */
export function fnv1a64(input: string | Uint8Array): bigint;
/** A user's partition: fnv1a64 of its UTF-8 bytes modulo P (SPEC §9). */
export function partitionOf(user: string, partitions: number): number;
/** The user a request's fields route by; null for fan-outs and requests without one. */
export function routingUser(fields: Record<string, unknown>): string | null;
/** hello's routes as seen from the instance connected to: which address a user's request goes to. */
export class RoutingTable {
  static fromHello(hello: HelloReply | null, connected: string): RoutingTable;
  constructor(partitions: number, hash: string | null, routes: Route[], connected: string);
  readonly partitions: number;
  readonly hash: string | null;
  readonly connected: string;
  /** Whether any partition is owned elsewhere (routing is then in use). */
  readonly direct: boolean;
  partitionOf(user: string): number;
  /** The owner's address when the user's partition is owned elsewhere; null: the instance connected to. */
  addressFor(user: string | null): string | null;
  withOwner(partition: number, address: string): RoutingTable;
}
