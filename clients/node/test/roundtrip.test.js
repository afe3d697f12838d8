// The runnable round trip (examples/roundtrip.js) against a real server prints its line and exits 0.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startServer } from './server.js';

const example = fileURLToPath(new URL('../examples/roundtrip.js', import.meta.url));
let server;

before(async () => { server = await startServer('roundtrip'); });
after(async () => { await server?.stop(); });

function run(env) {
  return new Promise((resolve) => {
    execFile(process.execPath, [example], { env: { ...process.env, ...env }, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? error.code ?? 1 : 0, stdout, stderr });
    });
  });
}

test('the roundtrip example prints "roundtrip: N acked, N delivered" last and exits 0', async () => {
  const { code, stdout, stderr } = await run({ HERALD_ADDR: server.address, N: '1000' });
  assert.equal(code, 0, stderr);
  assert.equal(stdout.trim().split('\n').at(-1), 'roundtrip: 1000 acked, 1000 delivered');
});

test('the roundtrip example exits non-zero with the error when it cannot connect', async () => {
  const { code, stderr } = await run({ HERALD_ADDR: '127.0.0.1:1', N: '5' });
  assert.notEqual(code, 0);
  assert.match(stderr, /roundtrip failed/);
});
