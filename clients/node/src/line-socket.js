// A TCP or TLS connection that reads and writes one JSON object per line.

import net from 'node:net';
import tls from 'node:tls';

/**
 * Opens a connection and resolves once it is established.
 * @param {{host: string, port: number, tls?: boolean | tls.ConnectionOptions, connectTimeoutMs?: number}} options
 * @param {(message: object) => void} onMessage each parsed line
 * @param {(error: Error | null) => void} onClose once, when the connection ends for any reason
 */
export function openLineSocket(options, onMessage, onClose) {
  return new Promise((resolve, reject) => {
    const { host, port } = options;
    let socket;
    let established = false;
    let closed = false;
    let lastError = null;
    const connectEvent = options.tls ? 'secureConnect' : 'connect';
    if (options.tls) {
      const tlsOptions = options.tls === true ? {} : options.tls;
      socket = tls.connect({ host, port, servername: net.isIP(host) ? undefined : host, ...tlsOptions });
    } else {
      socket = net.connect({ host, port });
    }
    socket.setNoDelay(true);
    const timer = setTimeout(() => {
      socket.destroy(new Error(`connecting to ${host}:${port} timed out`));
    }, options.connectTimeoutMs ?? 5000);

    let partial = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      let start = 0;
      let newline = chunk.indexOf('\n');
      if (newline === -1) { partial += chunk; return; }
      let text = partial + chunk.slice(0, newline);
      partial = '';
      for (;;) {
        if (text.length > 0) {
          let message;
          try { message = JSON.parse(text); } catch (e) {
            socket.destroy(new Error(`the server sent a line that is not JSON: ${text.slice(0, 200)}`));
            return;
          }
          onMessage(message);
          if (closed) return;
        }
        start = newline + 1;
        newline = chunk.indexOf('\n', start);
        if (newline === -1) break;
        text = chunk.slice(start, newline);
      }
      partial = chunk.slice(start);
    });
    socket.on(connectEvent, () => {
      clearTimeout(timer);
      established = true;
      resolve(socket);
    });
    socket.on('error', (e) => { lastError = e; });
    socket.on('close', () => {
      clearTimeout(timer);
      closed = true;
      if (!established) {
        reject(lastError ?? new Error(`connection to ${host}:${port} closed before it was established`));
      } else {
        onClose(lastError);
      }
    });
  });
}

/** Exponential backoff with jitter: attempt 0 waits about `initialMs`, doubling up to `maxMs`. */
export function backoffDelay(attempt, initialMs, maxMs) {
  const base = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return base / 2 + Math.random() * (base / 2);
}
