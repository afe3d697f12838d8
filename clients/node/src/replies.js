// Turning server replies into the client's ack and warning objects.

/**
 * A warning as `{code, title, detail, message}` whether the server sent `{code, message}`
 * (older servers) or `{code, title, detail}`.
 */
export function normalizeWarning(w) {
  if (w === null || typeof w !== 'object') {
    return { code: 'unknown', title: String(w), detail: '', message: String(w) };
  }
  const title = String(w.title ?? w.message ?? '');
  const detail = String(w.detail ?? '');
  const message = String(w.message ?? (detail ? `${title} ${detail}` : title));
  return { ...w, code: String(w.code ?? 'unknown'), title, detail, message };
}

/** The ack of a successful reply: every member the server sent, with defaults filled in. */
export function toAck(reply) {
  const ack = { ...reply };
  delete ack.ok;
  ack.partition = typeof reply.partition === 'number' ? reply.partition : 0;
  ack.duplicate = reply.duplicate === true;
  ack.warnings = Array.isArray(reply.warnings) ? reply.warnings.map(normalizeWarning) : [];
  return ack;
}

/** A delivery line as an object, with `partition` (0 when the server has one partition). */
export function toDelivery(line) {
  const d = { ...line };
  d.partition = typeof line.partition === 'number' ? line.partition : 0;
  return d;
}
