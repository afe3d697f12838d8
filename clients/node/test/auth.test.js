// Against a server with a tokens file: a wrong token and an op outside the token's roles
// reject with HeraldError; a right token is granted its roles.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { HeraldClient, HeraldError, subscribe } from '../index.js';
import { startServer } from './server.js';

let server;

before(async () => {
  server = await startServer('auth', {
    tokens: [
      { token: 'admin-token', roles: ['producer', 'settings', 'consumer', 'admin'], apps: ['com.example.mail'] },
      { token: 'mail-token', roles: ['producer'], apps: ['com.example.mail'] },
    ],
  });
});
after(async () => { await server?.stop(); });

function client(t, token) {
  const c = new HeraldClient({ host: server.host, port: server.port, token });
  t.after(() => c.destroy());
  return c;
}

test('a wrong token rejects connect with invalid_token, and later calls with the same error', async (t) => {
  const c = client(t, 'not-a-token');
  await assert.rejects(c.connect(), (e) => {
    assert.ok(e instanceof HeraldError);
    assert.equal(e.code, 'invalid_token');
    assert.ok(e.title.length > 0 && e.detail.length > 0);
    return true;
  });
  await assert.rejects(c.ping(), { code: 'invalid_token' });
});

test('a consumer with a wrong token fails with invalid_token', async () => {
  const s = subscribe({ host: server.host, port: server.port, token: 'wrong', consumer: 'c' });
  await assert.rejects(s.ready(), { name: 'HeraldError', code: 'invalid_token' });
});

test('a right token is granted its roles and its ops are acked', async (t) => {
  const admin = client(t, 'admin-token');
  const hello = await admin.connect();
  assert.deepEqual(hello.roles, ['producer', 'settings', 'consumer', 'admin']);
  assert.equal(typeof (await admin.registerApp({ app: 'com.example.mail' })).seq, 'number');
  const mail = client(t, 'mail-token');
  await mail.connect();
  const ack = await mail.submit({ app: 'com.example.mail', id: 'm-1', user: 'u', title: 'Hi', hiddenPreviewsBodyPlaceholder: 'x' });
  assert.equal(ack.duplicate, false);
});

test('an op the token does not allow rejects with forbidden, and one for another app with forbidden_app', async (t) => {
  const mail = client(t, 'mail-token');
  await mail.connect();
  await assert.rejects(mail.registerApp({ app: 'com.example.mail' }), (e) => {
    assert.ok(e instanceof HeraldError);
    assert.equal(e.code, 'forbidden');
    assert.equal(e.op, 'registerApp');
    return true;
  });
  await assert.rejects(mail.submit({ app: 'com.example.chat', id: 'x', user: 'u', title: 'Hi' }), { code: 'forbidden_app' });
  assert.equal((await mail.ping()).op, 'pong');
});
