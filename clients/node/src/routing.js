// Routing by partition (SPEC §9): the partition function, and which instance a request goes to by hello's routes.

const TWO_32 = 4294967296;
const encoder = new TextEncoder();

/** FNV-1a 64 of `bytes` as two 32-bit halves (exact in doubles: no BigInt on the request path). */
function fnv1a64Halves(bytes) {
  // Offset basis 0xcbf29ce484222325; prime 0x100000001b3 = 2^40 + 0x1b3.
  let hi = 0xcbf29ce4;
  let lo = 0x84222325;
  for (let i = 0; i < bytes.length; i++) {
    lo = (lo ^ bytes[i]) >>> 0;
    const low = lo * 0x1b3;
    const carry = Math.floor(low / TWO_32);
    hi = (hi * 0x1b3 + carry + ((lo * 256) % TWO_32)) % TWO_32;
    lo = low % TWO_32;
  }
  return [hi, lo];
}

/** FNV-1a, 64-bit, of a string's UTF-8 bytes (or of bytes), as a BigInt. */
export function fnv1a64(input) {
  const [hi, lo] = fnv1a64Halves(typeof input === 'string' ? encoder.encode(input) : input);
  return (BigInt(hi) << 32n) | BigInt(lo);
}

/** The partition of `user` among `partitions`: fnv1a64 of its UTF-8 bytes modulo P (0 when P is 1). */
export function partitionOf(user, partitions) {
  if (!(partitions > 1)) return 0;
  const [hi, lo] = fnv1a64Halves(encoder.encode(user));
  return ((hi % partitions) * (TWO_32 % partitions) + (lo % partitions)) % partitions;
}

/**
 * The user whose partition a request belongs to; null for requests any instance takes
 * (registerApp, clock, stats, a withdraw without `user`) and for fan-outs (the instance forwards).
 */
export function routingUser(fields) {
  if (!fields || typeof fields.user !== 'string' || fields.users) return null;
  return fields.user;
}

/** Reads hello's `routes`: a list (each with `partition`, or in partition order) or an object keyed by partition. */
export function readRoutes(value) {
  const route = (p, r) => {
    if (typeof r === 'string') return { partition: p, address: r, epoch: 0 };
    if (!r || typeof r !== 'object') return null;
    const address = r.address ?? r.owner ?? r.advertise;
    if (typeof address !== 'string') return null;
    return { partition: typeof r.partition === 'number' ? r.partition : p, address, epoch: typeof r.epoch === 'number' ? r.epoch : 0 };
  };
  let found = [];
  if (Array.isArray(value)) found = value.map((r, i) => route(i, r));
  else if (value && typeof value === 'object') found = Object.entries(value).filter(([k]) => /^\d+$/.test(k)).map(([k, r]) => route(Number(k), r));
  return found.filter((r) => r !== null).sort((a, b) => a.partition - b.partition);
}

/**
 * hello's `partitions`, `hash` and `routes` as seen from the instance connected to (`connected`, host:port).
 * `addressFor(user)` is the owner's address when the user's partition is owned elsewhere, else null: send to
 * the connected instance (it owns the partition, or it forwards). Only fnv1a64 can pick an owner.
 */
export class RoutingTable {
  static fromHello(hello, connected) {
    return new RoutingTable(hello?.partitions, hello?.hash, readRoutes(hello?.routes), connected);
  }

  constructor(partitions, hash, routes, connected) {
    this.partitions = Number.isInteger(partitions) && partitions > 1 ? partitions : 1;
    this.hash = typeof hash === 'string' ? hash : null;
    this.connected = connected;
    this.owners = new Map(routes.map((r) => [r.partition, r.address]));
    this.direct = this.partitions > 1 && (this.hash === null || this.hash === 'fnv1a64')
      && [...this.owners.values()].some((a) => a !== connected);
    this._cache = new Map();
  }

  partitionOf(user) {
    let p = this._cache.get(user);
    if (p === undefined) {
      p = partitionOf(user, this.partitions);
      if (this._cache.size >= 65536) this._cache.clear();
      this._cache.set(user, p);
    }
    return p;
  }

  /** Where a request for `user` goes: an owner's address, or null for the connected instance. */
  addressFor(user) {
    if (!this.direct || user === null || user === undefined) return null;
    const address = this.owners.get(this.partitionOf(user));
    return address === undefined || address === this.connected ? null : address;
  }

  /** This table with `partition` owned at `address` (what a `not_owner` error said). */
  withOwner(partition, address) {
    const routes = [...this.owners].filter(([p]) => p !== partition).map(([p, a]) => ({ partition: p, address: a, epoch: 0 }));
    routes.push({ partition, address, epoch: 0 });
    return new RoutingTable(this.partitions, this.hash, routes, this.connected);
  }
}
