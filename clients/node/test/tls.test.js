// TLS: the producer and the consumer connect to a server with a certificate, verifying it
// against the CA they are given; a client that does not trust it fails to connect.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { HeraldClient } from '../index.js';
import { startServer } from './server.js';

let server;

before(async () => { server = await startServer('tls', { tls: true }); });
after(async () => { await server?.stop(); });

test('a producer and a consumer round-trip over TLS', async (t) => {
  const client = new HeraldClient({ host: server.host, port: server.port, tls: { ca: server.certificate } });
  t.after(() => client.destroy());
  await client.connect();
  const app = 'com.example.tls';
  const user = 'tls-grace';
  await client.registerApp({ app });
  await client.authorization({ user, app, status: 'authorized', options: ['alert'] });
  const consumer = client.subscribe({ consumer: 'tls', from: 'committed' });
  t.after(() => consumer.close());
  await consumer.ready();
  const ack = await client.submit({ app, id: 'tls-1', user, title: 'Encrypted', hiddenPreviewsBodyPlaceholder: 'x' });
  assert.equal(ack.duplicate, false);
  for await (const d of consumer) {
    assert.equal(d.notification, 'tls-1');
    assert.equal(d.causeSeq, ack.seq);
    break;
  }
});

test('a client that does not trust the certificate fails to connect', async () => {
  const client = new HeraldClient({ host: server.host, port: server.port, tls: true, reconnect: false });
  await assert.rejects(client.connect(), /self[- ]signed|certificate/i);
  client.destroy();
});
