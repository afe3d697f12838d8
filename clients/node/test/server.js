// Starts a real `herald serve` for a test file: manual clock, its own private PostgreSQL cluster
// in a temporary directory, a free port; it can be killed (SIGKILL) and restarted on that port.

import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const HERALD_BINARY = process.env.HERALD_BINARY ?? fileURLToPath(new URL('../../../.build/debug/herald', import.meta.url));

export async function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * @param {string} name the private database's name suffix (nodeclient_<name>)
 * @param {{tokens?: {token: string, roles: string[], apps?: string[]}[], tls?: boolean, dir?: string,
 *   database?: string, fresh?: boolean, args?: string[]}} [options]
 *   tls: serve TLS with a self-signed certificate for 127.0.0.1 (server.certificate holds its PEM);
 *   dir, database, fresh: several servers on one existing private database (the caller removes dir);
 *   args: more flags for serve
 */
export async function startServer(name, options = {}) {
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(path.join(os.tmpdir(), `herald-node-${name}-`));
  const port = await freePort();
  const args = [
    'serve', '--listen', `127.0.0.1:${port}`, '--clock', 'manual', '--start', '2026-03-27T07:00:00Z',
    '--private-database', options.database ?? `nodeclient_${name}`, ...(options.args ?? []).map((a) => a.replace('{port}', String(port))),
  ];
  if (options.tokens) {
    const file = path.join(dir, 'tokens.json');
    const tokens = options.tokens.map((t, i) => ({
      name: `t${i}`,
      sha256: createHash('sha256').update(t.token).digest('hex'),
      roles: t.roles,
      ...(t.apps ? { apps: t.apps } : {}),
    }));
    writeFileSync(file, JSON.stringify({ tokens }));
    args.push('--tokens', file);
  }
  let certificate = null;
  if (options.tls) {
    const cert = path.join(dir, 'server.crt');
    const key = path.join(dir, 'server.key');
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=localhost',
      '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-keyout', key, '-out', cert,
    ], { stdio: 'ignore' });
    args.push('--tls-cert', cert, '--tls-key', key);
    certificate = readFileSync(cert, 'utf8');
  }
  const server = {
    certificate,
    port,
    host: '127.0.0.1',
    address: `127.0.0.1:${port}`,
    dir,
    process: null,
    log: '',
    async start(fresh = false) {
      const child = spawn(HERALD_BINARY, fresh ? [...args, '--fresh-private-database'] : args, {
        cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SWIFT_BACKTRACE: 'enable=no' },
      });
      this.process = child;
      const logBefore = this.log.length;
      await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`herald serve did not start within 120 s:\n${this.log}`)), 120_000);
        const seen = (chunk) => {
          this.log += chunk;
          if (this.log.includes(`listening on 127.0.0.1:${port}`, logBefore)) { clearTimeout(timer); resolve(); }
        };
        child.stdout.setEncoding('utf8').on('data', seen);
        child.stderr.setEncoding('utf8').on('data', seen);
        child.on('exit', (code, signal) => {
          clearTimeout(timer);
          reject(new Error(`herald serve exited (${code ?? signal}) before listening:\n${this.log}`));
        });
      });
      // Waiting for 'listening' resolved the promise; later exits are expected (kill, stop).
      child.removeAllListeners('exit');
    },
    /** Kills the server with `signal` and waits for it to exit. */
    async kill(signal = 'SIGKILL') {
      const child = this.process;
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill(signal);
      await exited;
      this.process = null;
    },
    async restart() {
      await this.kill('SIGKILL');
      await this.start(false);
    },
    async stop() {
      // On SIGTERM the server also stops its private cluster (it is the last Herald process on it).
      await this.kill('SIGTERM');
      if (ownDir) rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await server.start(options.fresh ?? true);
  } catch (e) {
    if (ownDir) rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return server;
}
