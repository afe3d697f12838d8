// HeraldClient: a producer connection that pipelines requests, bounds what is in flight and
// reconnects, resending whatever was not acknowledged.

import { HeraldError, FATAL_CONNECTION_CODES } from './errors.js';
import { openLineSocket, backoffDelay } from './line-socket.js';
import { toAck } from './replies.js';
import { RoutingTable, routingUser } from './routing.js';
import { Subscription } from './subscription.js';

const DEFAULTS = {
  host: '127.0.0.1',
  port: 7411,
  window: 1024,
  connectTimeoutMs: 5000,
  keepAliveMs: 60_000,
  reconnect: { initialMs: 50, maxMs: 2000, maxAttempts: Infinity },
};

/** Parses "host:port" (IPv6 as "[::1]:7411"). */
export function parseAddress(address, defaultPort = 7411) {
  const m = /^\[(.*)\](?::(\d+))?$/.exec(address) ?? /^([^:]*)(?::(\d+))?$/.exec(address);
  if (!m) throw new TypeError(`not a host:port address: ${address}`);
  return { host: m[1] || '127.0.0.1', port: m[2] ? Number(m[2]) : defaultPort };
}

export class HeraldClient {
  /** Connects and says hello; resolves once the hello is granted. */
  static async connect(options = {}) {
    const client = new HeraldClient(options);
    await client.connect();
    return client;
  }

  constructor(options = {}) {
    const address = options.address ? parseAddress(options.address) : {};
    this.options = {
      ...DEFAULTS,
      ...address,
      ...options,
      reconnect: options.reconnect === false
        ? { ...DEFAULTS.reconnect, maxAttempts: 0 }
        : { ...DEFAULTS.reconnect, ...(options.reconnect ?? {}) },
    };
    if (!(this.options.window >= 1)) throw new RangeError('window must be at least 1');
    // Routing (SPEC §9): each user's requests to its partition's owner when hello's routes name owners elsewhere.
    this._routing = this.options.routing !== false;
    // A connection to a partition's owner: its requests say `"route":"direct"` (a non-owner refuses them
    // with `not_owner` instead of forwarding them).
    this._direct = this.options.direct === true;
    this._owners = new Map(); // owner address → HeraldClient, or null for one that could not be reached
    this._table = null;
    this._tableHello = undefined;
    this._refreshing = null;
    /** How many requests were sent again after a `not_owner` refusal. */
    this.notOwnerResends = 0;
    /** The granted hello reply of the current connection. */
    this.hello = null;
    /** How many connections were made after the first (for tests and metrics). */
    this.reconnects = 0;
    this._queue = [];        // requests not yet written, in call order
    this._inflight = [];     // requests written on the current connection, awaiting replies in order
    this._socket = null;
    this._ready = false;     // connected and hello granted
    this._goingAway = false; // the server said goodbye: write nothing more on this connection
    this._closing = false;
    this._closed = false;
    this._fatal = null;
    this._nextRid = 1;
    this._attempt = 0;
    this._reconnectTimer = null;
    this._connecting = null;
    this._readyWaiters = [];
    this._lastWrite = Date.now();
    this._keepAlive = null;
  }

  /** Opens the first connection; rejects with the error if it cannot be made or the hello is refused. */
  async connect() {
    if (this._ready) return this.hello;
    if (!this._connecting) {
      this._connecting = this._open().finally(() => { this._connecting = null; });
    }
    return this._connecting;
  }

  /** Requests written and not yet answered (on every connection). */
  get inFlight() {
    let n = this._inflight.length;
    for (const owner of this._owners.values()) if (owner) n += owner._inflight.length;
    return n;
  }

  /** The routing table of the latest hello (rebuilt when a reconnect or a refresh brings a new one). */
  get routes() {
    if (this.hello !== this._tableHello) {
      this._tableHello = this.hello;
      this._table = RoutingTable.fromHello(this.hello, `${this.options.host}:${this.options.port}`);
      // Owners that could not be reached are tried again under new routes.
      for (const [address, owner] of this._owners) if (owner === null) this._owners.delete(address);
    }
    return this._table;
  }

  /** Says hello again on this connection: the latest routes (one refresh at a time). Resolves with the reply. */
  refreshRoutes() {
    if (!this._refreshing) {
      const fields = this.options.token !== undefined ? { token: this.options.token } : {};
      this._refreshing = this._send('hello', fields, true)
        .then((reply) => { this.hello = reply; return reply; })
        .finally(() => { this._refreshing = null; });
    }
    return this._refreshing;
  }

  /** Requests waiting for room in the window (or for a connection). */
  get queued() { return this._queue.length; }

  /**
   * Resolves when fewer than `window` requests are queued or in flight: await it before each
   * call to keep memory bounded however many requests a loop makes.
   */
  whenWritable() {
    if (this._queue.length + this._inflight.length < this.options.window) return Promise.resolve();
    return new Promise((resolve) => this._readyWaiters.push(resolve));
  }

  /**
   * Sends any op and resolves with its ack (the reply with `partition`, `seq`, `duplicate` and
   * `warnings` filled in), or rejects with a HeraldError.
   */
  request(op, fields = {}) {
    if (!this._routing || this._closed || this._closing || this._fatal) return this._send(op, fields);
    return this._routed(op, fields, 0);
  }

  /** Sends on the partition owner's connection (or this one); `not_owner` refreshes the routes and sends again. */
  _routed(op, fields, attempts) {
    const owner = this._ownerFor(fields);
    const sent = owner ? this._viaOwner(owner, op, fields) : this._send(op, fields);
    return sent.catch(async (error) => {
      if (!(error instanceof HeraldError) || error.code !== 'not_owner' || attempts >= 3 || this._closed) throw error;
      this.notOwnerResends += 1;
      try { await this.refreshRoutes(); } catch { /* the routes stay as they were */ }
      const user = routingUser(fields);
      if (error.owner && user !== null && this.routes.partitions > 1) {
        this._table = this._table.withOwner(this._table.partitionOf(user), error.owner);
      }
      return this._routed(op, fields, attempts + 1);
    });
  }

  /** The connection to the owner of the request's partition when that is elsewhere (opened on first use), else null. */
  _ownerFor(fields) {
    const table = this.routes;
    if (!table.direct) return null;
    const address = table.addressFor(routingUser(fields));
    if (address === null) return null;
    if (this._owners.has(address)) return this._owners.get(address);
    let owner = null;
    try {
      const { host, port } = parseAddress(address);
      const options = { ...this.options, host, port, routing: false, direct: true, reconnect: { ...this.options.reconnect, maxAttempts: 3 } };
      delete options.address;
      owner = new HeraldClient(options);
    } catch { /* not host:port: the connected instance forwards */ }
    this._owners.set(address, owner);
    return owner;
  }

  /** An owner that cannot be reached leaves the request to the connected instance (which forwards). */
  _viaOwner(owner, op, fields) {
    return owner._send(op, fields).catch((error) => {
      if (!(error instanceof HeraldError) || error.code !== 'connection_lost' || this._closed) throw error;
      for (const [address, o] of this._owners) if (o === owner) this._owners.set(address, null);
      owner.destroy();
      return this._send(op, fields);
    });
  }

  _send(op, fields = {}, raw = false) {
    if (this._closed || this._closing) {
      return Promise.reject(new HeraldError('client_closed', 'The client was closed', 'Make a new HeraldClient.', { op }));
    }
    if (this._fatal) return Promise.reject(this._fatal);
    return new Promise((resolve, reject) => {
      const body = { ...fields };
      delete body.rid;
      if (this._direct) body.route = 'direct';
      this._queue.push({ op, body, resolve, reject, raw });
      if (!this._socket && !this._connecting && !this._reconnectTimer) this._scheduleReconnect(0);
      this._pump();
    });
  }

  // Producer ops.
  submit(notification) { return this.request('submit', notification); }
  withdraw(fields) { return this.request('withdraw', fields); }
  // Settings ops.
  authorization(fields) { return this.request('authorization', fields); }
  settings(fields) { return this.request('settings', fields); }
  provisionalKeep(fields) { return this.request('provisionalKeep', fields); }
  provisionalTurnOff(fields) { return this.request('provisionalTurnOff', fields); }
  summarySchedule(fields) { return this.request('summarySchedule', fields); }
  focusDefine(fields) { return this.request('focusDefine', fields); }
  focusOn(fields) { return this.request('focusOn', fields); }
  focusOff(fields) { return this.request('focusOff', fields); }
  mute(fields) { return this.request('mute', fields); }
  snooze(fields) { return this.request('snooze', fields); }
  opened(fields) { return this.request('opened', fields); }
  badgeClear(fields) { return this.request('badgeClear', fields); }
  // Admin ops.
  registerApp(fields) { return this.request('registerApp', fields); }
  clock(fields) {
    return this.request('clock', typeof fields === 'string' || fields instanceof Date ? { advanceTo: toInstant(fields) } : fields);
  }
  /** Erases the user's stored notification content (SPEC §14); acked with the erasure event's seq. */
  erase(user) { return this.request('erase', typeof user === 'string' ? { user } : user); }
  /** Every durable consumer with its cursors, lag, filter and live members, then the ephemeral streams. */
  consumers() { return this.request('consumers'); }
  /** Closes the consumer's connections and removes its cursors; `unknown_consumer` for a name that does not exist. */
  deleteConsumer(consumer) { return this.request('deleteConsumer', typeof consumer === 'string' ? { consumer } : consumer); }
  // Any role.
  ping() { return this.request('ping'); }
  stats() { return this.request('stats'); }

  /**
   * A consumer on a connection of its own (one stream per connection), with this client's
   * address, TLS and token. Iterate it with `for await`.
   */
  subscribe(options) {
    const { host, port, tls, token, connectTimeoutMs, keepAliveMs, reconnect } = this.options;
    return new Subscription({ host, port, tls, token, connectTimeoutMs, keepAliveMs, reconnect, ...options });
  }

  /** Waits for every request made so far to be answered, then closes the connections. */
  async close() {
    if (this._closed) return;
    await Promise.all([...this._owners.values()].filter((o) => o).map((o) => o.close()));
    this._closing = true;
    const pending = [...this._queue, ...this._inflight].map((e) => new Promise((r) => {
      const { resolve, reject } = e;
      e.resolve = (v) => { resolve(v); r(); };
      e.reject = (v) => { reject(v); r(); };
    }));
    if (pending.length > 0 && !this._fatal) await Promise.all(pending);
    this.destroy();
  }

  /** Closes at once; whatever is unanswered rejects with `client_closed`. */
  destroy() {
    this._closed = true;
    clearTimeout(this._reconnectTimer);
    this._reconnectTimer = null;
    clearInterval(this._keepAlive);
    this._socket?.destroy();
    this._socket = null;
    this._ready = false;
    for (const owner of this._owners.values()) owner?.destroy();
    this._failAll(new HeraldError('client_closed', 'The client was closed before the reply came', 'The request may or may not have been stored; a submit can be sent again safely.'));
  }

  // --- connection handling ---

  async _open() {
    const socket = await openLineSocket(this.options, (m) => this._received(socket, m), (e) => this._disconnected(socket, e));
    if (this._closed) { socket.destroy(); throw new HeraldError('client_closed', 'The client was closed'); }
    this._socket = socket;
    this._goingAway = false;
    this._helloWaiter = null;
    const hello = { op: 'hello', rid: 0 };
    if (this.options.token !== undefined) hello.token = this.options.token;
    const granted = new Promise((resolve, reject) => { this._helloWaiter = { resolve, reject }; });
    socket.write(JSON.stringify(hello) + '\n');
    let reply;
    try {
      reply = await granted;
    } catch (e) {
      this._socket = null;
      socket.destroy();
      if (e instanceof HeraldError && FATAL_CONNECTION_CODES.has(e.code)) {
        this._fatal = e;
        this._failAll(e);
      }
      throw e;
    }
    if (this.hello) this.reconnects += 1;
    this.hello = reply;
    this._ready = true;
    this._attempt = 0;
    if (!this._keepAlive && this.options.keepAliveMs > 0) {
      this._keepAlive = setInterval(() => {
        if (this._ready && Date.now() - this._lastWrite >= this.options.keepAliveMs) this.ping().catch(() => {});
      }, this.options.keepAliveMs);
      this._keepAlive.unref();
    }
    this._pump();
    return reply;
  }

  _received(socket, message) {
    if (socket !== this._socket) return;
    if (this._helloWaiter && message.rid === 0 && message.op !== 'goodbye') {
      const waiter = this._helloWaiter;
      this._helloWaiter = null;
      if (message.ok) waiter.resolve(message);
      else waiter.reject(HeraldError.fromReply(message, 'hello'));
      return;
    }
    if (message.op === 'goodbye') {
      // The server is stopping or handing over: it answers what it has read, then closes.
      this._goingAway = true;
      if (this._inflight.length === 0) socket.end();
      return;
    }
    const head = this._inflight[0];
    if (head && message.rid === head.rid) {
      this._inflight.shift();
      if (message.ok) head.resolve(head.raw ? message : toAck(message));
      else head.reject(HeraldError.fromReply(message, head.op));
      if (this._goingAway && this._inflight.length === 0) socket.end();
      this._wakeWriters();
      this._pump();
      return;
    }
    if (message.ok === false) {
      // A connection-level error line (sent before the server closes the connection).
      const error = HeraldError.fromReply(message);
      if (FATAL_CONNECTION_CODES.has(error.code)) this._fatal = error;
      this._lastConnectionError = error;
    }
  }

  _disconnected(socket, error) {
    if (socket !== this._socket) return;
    this._socket = null;
    this._ready = false;
    if (this._helloWaiter) {
      const waiter = this._helloWaiter;
      this._helloWaiter = null;
      waiter.reject(this._lastConnectionError ?? error ?? new Error('connection closed before the hello reply'));
    }
    // Whatever was written and not answered goes again, before what was never written.
    for (const e of this._inflight) delete e.rid;
    this._queue = this._inflight.concat(this._queue);
    this._inflight = [];
    if (this._closed) return;
    if (this._fatal) { this._failAll(this._fatal); return; }
    if (this._queue.length > 0 || !this._closing) this._scheduleReconnect(this._attempt);
  }

  _scheduleReconnect(attempt) {
    if (this._closed || this._reconnectTimer) return;
    const { initialMs, maxMs, maxAttempts } = this.options.reconnect;
    if (attempt > maxAttempts) {
      this._failAll(new HeraldError('connection_lost', `The connection to ${this.options.host}:${this.options.port} was lost`, `Gave up after ${maxAttempts} attempts to reconnect.`));
      return;
    }
    const delay = attempt === 0 ? 0 : backoffDelay(attempt - 1, initialMs, maxMs);
    this._reconnectTimer = setTimeout(() => {
      this._reconnectTimer = null;
      this._attempt = attempt + 1;
      this._connecting = this._open()
        .catch(() => {
          if (!this._fatal) this._scheduleReconnect(this._attempt);
        })
        .finally(() => { this._connecting = null; });
    }, delay);
  }

  _pump() {
    const socket = this._socket;
    if (!socket || !this._ready || this._goingAway || this._queue.length === 0) return;
    const room = this.options.window - this._inflight.length;
    if (room <= 0) return;
    const batch = this._queue.splice(0, room);
    let text = '';
    for (const e of batch) {
      e.rid = this._nextRid++;
      text += JSON.stringify({ op: e.op, rid: e.rid, ...e.body }) + '\n';
      this._inflight.push(e);
    }
    this._lastWrite = Date.now();
    socket.write(text);
  }

  _wakeWriters() {
    while (this._readyWaiters.length > 0 && this._queue.length + this._inflight.length < this.options.window) {
      this._readyWaiters.shift()();
    }
  }

  _failAll(error) {
    const all = this._inflight.concat(this._queue);
    this._inflight = [];
    this._queue = [];
    for (const e of all) e.reject(error);
    const waiters = this._readyWaiters;
    this._readyWaiters = [];
    for (const w of waiters) w();
  }
}

function toInstant(t) {
  return t instanceof Date ? t.toISOString() : t;
}
