// Subscription: a durable consumer's stream of deliveries as an async iterator, with batched
// acks per partition and resumption after a reconnect.

import { HeraldError, FATAL_CONNECTION_CODES } from './errors.js';
import { openLineSocket, backoffDelay } from './line-socket.js';
import { toDelivery } from './replies.js';

const DEFAULTS = {
  host: '127.0.0.1',
  port: 7411,
  from: 'committed',
  autoAck: true,
  ackEvery: 256,
  ackIntervalMs: 200,
  highWaterMark: 4096,
  connectTimeoutMs: 5000,
  keepAliveMs: 60_000,
  reconnect: { initialMs: 50, maxMs: 2000, maxAttempts: Infinity },
};

export class Subscription {
  constructor(options) {
    if (!options || typeof options.consumer !== 'string') throw new TypeError('subscribe needs a consumer name');
    this.options = {
      ...DEFAULTS,
      ...options,
      reconnect: options.reconnect === false
        ? { ...DEFAULTS.reconnect, maxAttempts: 0 }
        : { ...DEFAULTS.reconnect, ...(options.reconnect ?? {}) },
    };
    this.consumer = options.consumer;
    /** The cursor the stream started after (from the first subscribe reply). */
    this.startCursor = null;
    this.reconnects = 0;
    // Per partition (SPEC §9): the newest cursor received, processed (yielded and moved past, or
    // acked explicitly), sent in an ack, and confirmed by the server.
    this._receivedBy = new Map();
    this._processedBy = new Map();
    this._ackSentBy = new Map();
    this._ackedBy = new Map();
    this._named = new Set();  // partitions whose lines named `partition` (their acks name it too)
    this._unacked = 0;
    this._buffer = [];        // deliveries received, not yet yielded ({skip: true} for filtered ones)
    this._waiter = null;      // a pending next()
    this._yielded = null;     // the cursor of the delivery last yielded, processed on the next next()
    this._socket = null;
    this._requests = [];      // this connection's requests awaiting replies, in order
    this._nextRid = 1;
    this._ended = false;
    this._error = null;
    this._ackTimer = null;
    this._lastAck = Promise.resolve();
    this._attempt = 0;
    this._paused = false;
    this._lastWrite = Date.now();
    this._keepAlive = null;
    this._started = this._connect(this.options.from).catch((e) => { this._fail(e); });
  }

  /** The newest cursor received (of partition 0: a one-partition server's only one). */
  get receivedCursor() { return this._receivedBy.get(0) ?? null; }
  /** The newest cursor processed (of partition 0). */
  get processedCursor() { return this._processedBy.get(0) ?? null; }
  /** The newest cursor the server confirmed as acknowledged (of partition 0). */
  get ackedCursor() { return this._ackedBy.get(0) ?? null; }
  /** The newest cursor the server confirmed as acknowledged, per partition: `{partition: cursor}`. */
  get acknowledged() { return Object.fromEntries(this._ackedBy); }

  /** Resolves once the first subscribe is answered (rejects if it is refused). */
  async ready() {
    await this._started;
    if (this._error && this.startCursor === null) throw this._error;
    return this.startCursor;
  }

  [Symbol.asyncIterator]() { return this; }

  /** The next delivery; the previous one counts as processed (acked in the next batch). */
  async next() {
    if (this.options.autoAck && this._yielded !== null) {
      this._processed(this._yielded.partition, this._yielded.cursor);
      this._yielded = null;
    }
    for (;;) {
      while (this._buffer.length > 0) {
        const d = this._buffer.shift();
        this._maybeResume();
        if (d.skip) { if (this.options.autoAck) this._processed(d.partition, d.cursor); continue; }
        this._yielded = d;
        return { value: d, done: false };
      }
      if (this._error) throw this._error;
      if (this._ended) return { value: undefined, done: true };
      await new Promise((resolve) => { this._waiter = resolve; });
    }
  }

  /** Ends iteration (a `break` out of `for await` calls it): acks what was processed, then closes. */
  async return() {
    await this.close();
    return { value: undefined, done: true };
  }

  /**
   * Marks a delivery (or a cursor of `partition`) as processed, with every one before it in its
   * partition; it is acked in the next batch, naming the partition.
   */
  ack(cursor, partition = 0) {
    if (cursor !== null && typeof cursor === 'object') this._processed(cursor.partition ?? 0, cursor.cursor);
    else this._processed(partition, cursor);
  }

  /** Acks what was processed, waits for the server's reply, and closes the connection. */
  async close() {
    if (this._ended) return;
    if (this.options.autoAck && this._yielded !== null) {
      this._processed(this._yielded.partition, this._yielded.cursor);
      this._yielded = null;
    }
    this._ended = true;
    try { await this._flushAck(); } catch { /* best effort: the server keeps the last ack it stored */ }
    this._shutdown();
  }

  // --- acks ---

  _processed(partition, cursor) {
    if (typeof cursor !== 'number') return;
    if (cursor <= (this._processedBy.get(partition) ?? -1)) return;
    this._processedBy.set(partition, cursor);
    this._unacked += 1;
    if (this._unacked >= this.options.ackEvery) {
      this._flushAck().catch(() => {});
    } else if (!this._ackTimer) {
      this._ackTimer = setTimeout(() => {
        this._ackTimer = null;
        this._flushAck().catch(() => {});
      }, this.options.ackIntervalMs);
    }
  }

  /** Acks each partition's newest processed cursor that is newer than its last ack. */
  async _flushAck() {
    clearTimeout(this._ackTimer);
    this._ackTimer = null;
    if (!this._socket) return this._lastAck;
    this._unacked = 0;
    for (const [partition, cursor] of [...this._processedBy].sort((a, b) => a[0] - b[0])) {
      if (cursor <= (this._ackSentBy.get(partition) ?? -1)) continue;
      this._ackSentBy.set(partition, cursor);
      const ack = { op: 'ack', consumer: this.consumer, cursor };
      if (this._named.has(partition)) ack.partition = partition;
      // Acks are answered in order, so waiting for the newest waits for every earlier one.
      this._lastAck = this._request(ack).then((reply) => {
        const stored = typeof reply.cursor === 'number' ? reply.cursor : cursor;
        if (stored > (this._ackedBy.get(partition) ?? -1)) this._ackedBy.set(partition, stored);
      });
      // An ack refused (`partition_reassigned`: its partition moved to another member of the
      // group) is not an error of the reader's: the lines go to that member. Only the last ack's
      // promise is awaited; the earlier ones must not reject unheard.
      this._lastAck.catch(() => {});
    }
    return this._lastAck;
  }

  // --- connection handling ---

  async _connect(from) {
    const socket = await openLineSocket(this.options, (m) => this._received(socket, m), (e) => this._disconnected(socket, e));
    if (this._ended) { socket.destroy(); return; }
    this._socket = socket;
    this._requests = [];
    const hello = { op: 'hello' };
    if (this.options.token !== undefined) hello.token = this.options.token;
    const subscribe = { op: 'subscribe', consumer: this.consumer, from };
    if (this.options.filter) subscribe.filter = this.options.filter;
    // Both go at once; a refused hello makes the subscribe's refusal (hello_required) moot.
    const [helloResult, subscribeResult] = await Promise.allSettled([this._request(hello), this._request(subscribe)]);
    if (helloResult.status === 'rejected') throw helloResult.reason;
    if (subscribeResult.status === 'rejected') throw subscribeResult.reason;
    const reply = subscribeResult.value;
    if (this.startCursor === null) this.startCursor = reply.cursor;
    if (this._named.size === 0 && !this._receivedBy.has(0) && typeof reply.cursor === 'number') this._receivedBy.set(0, reply.cursor);
    this._attempt = 0;
    if (!this._keepAlive && this.options.keepAliveMs > 0) {
      this._keepAlive = setInterval(() => {
        if (this._socket && Date.now() - this._lastWrite >= this.options.keepAliveMs) this._request({ op: 'ping' }).catch(() => {});
      }, this.options.keepAliveMs);
      this._keepAlive.unref();
    }
    // Acks lost with the previous connection go again.
    let lost = false;
    for (const [partition, cursor] of this._processedBy) {
      if (cursor > (this._ackedBy.get(partition) ?? -1)) {
        lost = true;
        if (this._ackedBy.has(partition)) this._ackSentBy.set(partition, this._ackedBy.get(partition));
        else this._ackSentBy.delete(partition);
      }
    }
    if (lost) this._flushAck().catch(() => {});
  }

  _request(message) {
    return new Promise((resolve, reject) => {
      const socket = this._socket;
      if (!socket) { reject(new HeraldError('connection_lost', 'Not connected')); return; }
      const rid = this._nextRid++;
      this._requests.push({ rid, op: message.op, resolve, reject });
      this._lastWrite = Date.now();
      socket.write(JSON.stringify({ ...message, rid }) + '\n');
    });
  }

  _received(socket, message) {
    if (socket !== this._socket) return;
    if (message.op === 'delivery') {
      const cursor = message.cursor;
      const partition = typeof message.partition === 'number' ? message.partition : 0;
      if (typeof message.partition === 'number') this._named.add(partition);
      if (cursor <= (this._receivedBy.get(partition) ?? -1)) return; // seen before a reconnect
      this._receivedBy.set(partition, cursor);
      const filter = this.options.filter;
      const wanted = !filter
        || ((!filter.apps || filter.apps.includes(message.app)) && (!filter.kinds || filter.kinds.includes(message.kind)));
      this._buffer.push(wanted ? toDelivery(message) : { skip: true, partition, cursor });
      if (this._buffer.length >= this.options.highWaterMark && !this._paused) {
        this._paused = true;
        socket.pause();
      }
      this._wake();
      return;
    }
    if (message.op === 'goodbye') { this._goingAway = true; return; }
    const head = this._requests[0];
    if (head && message.rid === head.rid) {
      this._requests.shift();
      if (message.ok) head.resolve(message);
      else head.reject(HeraldError.fromReply(message, head.op));
      return;
    }
    if (message.ok === false) {
      const error = HeraldError.fromReply(message);
      this._lastConnectionError = error;
      if (FATAL_CONNECTION_CODES.has(error.code)) this._fatalError = error;
    }
  }

  _disconnected(socket, error) {
    if (socket !== this._socket) return;
    this._socket = null;
    this._paused = false;
    const lost = new HeraldError('connection_lost', 'The connection closed before the reply', String(error?.message ?? ''));
    for (const r of this._requests) r.reject(lost);
    this._requests = [];
    if (this._ended) return;
    if (this._fatalError) { this._fail(this._fatalError); return; }
    this._reconnect();
  }

  _reconnect() {
    const { initialMs, maxMs, maxAttempts } = this.options.reconnect;
    if (this._attempt >= maxAttempts) {
      this._fail(new HeraldError('connection_lost', 'The consumer connection was lost', `Gave up after ${maxAttempts} attempts to reconnect.`));
      return;
    }
    const delay = backoffDelay(this._attempt, initialMs, maxMs);
    this._attempt += 1;
    setTimeout(() => {
      if (this._ended) return;
      // One partition: resume after the newest delivery received (those still in the buffer are
      // not lost, and the server's acked cursor stays where the acks put it). Several: from the
      // committed cursors, once the acks lost are sent again; lines received twice are dropped.
      const from = this._named.size > 0 ? 'committed' : (this.receivedCursor ?? this.options.from);
      this._connect(from)
        .then(() => { this.reconnects += 1; })
        .catch((e) => {
          if (e instanceof HeraldError && FATAL_CONNECTION_CODES.has(e.code)) { this._fail(e); return; }
          this._socket?.destroy();
          if (!this._socket && !this._ended) this._reconnect();
        });
    }, delay);
  }

  _maybeResume() {
    if (this._paused && this._buffer.length <= this.options.highWaterMark / 2) {
      this._paused = false;
      this._socket?.resume();
    }
  }

  _wake() {
    const w = this._waiter;
    this._waiter = null;
    w?.();
  }

  _fail(error) {
    if (this._error || this._ended) return;
    this._error = error;
    this._shutdown();
    this._wake();
  }

  _shutdown() {
    clearTimeout(this._ackTimer);
    clearInterval(this._keepAlive);
    const socket = this._socket;
    this._socket = null;
    socket?.end();
    socket?.destroySoon?.();
    this._wake();
  }
}
