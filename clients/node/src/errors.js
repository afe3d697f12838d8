// HeraldError: a refused request or a failed connection, with the server's code, title and detail.

export class HeraldError extends Error {
  /**
   * @param {string} code stable snake_case code (the server's, or a client one such as `connection_closed`)
   * @param {string} title what happened, specifically
   * @param {string} [detail] why, and what to change
   * @param {object} [extra] `op` and `rid` of the request it answers, when known
   */
  constructor(code, title, detail = '', extra = {}) {
    super(`${code}: ${title}`);
    this.name = 'HeraldError';
    this.code = code;
    this.title = title;
    this.detail = detail;
    if (extra.op !== undefined) this.op = extra.op;
    if (extra.rid !== undefined) this.rid = extra.rid;
    if (extra.owner !== undefined) this.owner = extra.owner;
  }

  /** The error of a server reply `{"ok":false,"error":{…}}`. */
  static fromReply(reply, op) {
    const e = reply.error ?? {};
    // `not_owner` may name the partition's owner (host:port).
    const owner = [e.owner, e.address, reply.owner].find((a) => typeof a === 'string' && a.includes(':'));
    return new HeraldError(
      String(e.code ?? 'unknown_error'),
      String(e.title ?? e.message ?? 'The server refused the request'),
      String(e.detail ?? ''),
      { op, rid: reply.rid, owner },
    );
  }
}

/** Codes after which the connection is not tried again: retrying cannot succeed. */
export const FATAL_CONNECTION_CODES = new Set([
  'invalid_token',
  'too_many_refused_hellos',
  'grant_revoked',
  'forbidden_consumer',
]);
