// The server killed (SIGKILL) or stopped mid-stream and restarted: the producer reconnects and
// resends what was not acknowledged, each submit acked exactly once as stored; a consumer
// resumes where it was with nothing skipped.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { HeraldClient } from '../index.js';
import { startServer } from './server.js';

let server;

before(async () => { server = await startServer('reconnect'); });
after(async () => { await server?.stop(); });

function connect(t, options = {}) {
  const client = new HeraldClient({ host: server.host, port: server.port, reconnect: { initialMs: 50, maxMs: 500 }, ...options });
  t.after(() => client.destroy());
  return client.connect().then(() => client);
}

async function submitThrough(t, restart, app) {
  const client = await connect(t, { window: 512 });
  const base = (await client.registerApp({ app })).seq;
  const n = 6000;
  let settled = 0;
  let restarted = null;
  const acks = [];
  for (let i = 0; i < n; i++) {
    const p = client.submit({ app, id: `r-${i}`, user: `r-user-${i % 97}`, title: 'R', hiddenPreviewsBodyPlaceholder: 'x' });
    p.then(() => {
      settled += 1;
      if (settled === 1500) restarted = restart();
    }, () => {});
    acks.push(p);
  }
  const results = await Promise.all(acks);
  await restarted;
  assert.ok(client.reconnects >= 1, 'the client reconnected');
  // Every submit acked once, each with a seq of its own, and the log holds exactly these n
  // events after the app's (seq is gap-free): nothing stored twice, nothing lost.
  const seqs = results.map((a) => a.seq).sort((a, b) => a - b);
  assert.deepEqual(seqs, Array.from({ length: n }, (_, i) => base + 1 + i));
  assert.equal((await client.ping()).op, 'pong');
  await client.close();
  return results.filter((a) => a.duplicate).length;
}

test('after a SIGKILL and restart every submit is acked exactly once as stored', async (t) => {
  const duplicates = await submitThrough(t, () => server.restart(), 'com.example.kill');
  t.diagnostic(`${duplicates} resubmits came back duplicate`);
});

test('after a goodbye (the server stopped by SIGTERM) and a restart every submit is acked exactly once', async (t) => {
  const duplicates = await submitThrough(t, async () => { await server.kill('SIGTERM'); await server.start(false); }, 'com.example.term');
  t.diagnostic(`${duplicates} resubmits came back duplicate`);
});

test('a consumer resumes after its last ack with nothing skipped', async (t) => {
  const client = await connect(t);
  const app = 'com.example.resume';
  const user = 'resume-eve';
  await client.registerApp({ app });
  await client.authorization({ user, app, status: 'authorized', options: ['alert'] });
  const first = client.subscribe({ consumer: 'resume', from: 'committed', filter: { apps: [app] }, ackEvery: 10 });
  t.after(() => first.close());
  const start = await first.ready();
  await Promise.all(Array.from({ length: 100 }, (_, i) => client.submit({ app, id: `c-${i}`, user, title: 'C', hiddenPreviewsBodyPlaceholder: 'x' })));

  const seen = [];
  for await (const d of first) {
    seen.push(d.notification);
    if (seen.length === 40) break; // acks the 40 processed, then closes
  }
  assert.equal(first.ackedCursor, first.processedCursor);

  const second = client.subscribe({ consumer: 'resume', from: 'committed', filter: { apps: [app] } });
  t.after(() => second.close());
  assert.equal(await second.ready(), first.ackedCursor, 'resumes right after the last ack');
  for await (const d of second) {
    seen.push(d.notification);
    if (seen.length === 100) break;
  }
  assert.deepEqual(seen, Array.from({ length: 100 }, (_, i) => `c-${i}`));
  assert.ok(start < first.ackedCursor);
  await client.close();
});

test('two subscriptions of one name form a group: the newer streams, the older goes on after the last ack when it closes', async (t) => {
  const client = await connect(t);
  const app = 'com.example.group';
  const user = 'group-gina';
  await client.registerApp({ app });
  await client.authorization({ user, app, status: 'authorized', options: ['alert'] });
  const submit = (id) => client.submit({ app, id, user, title: 'G', hiddenPreviewsBodyPlaceholder: 'x' });
  const first = client.subscribe({ consumer: 'group', from: 'committed', ackEvery: 1 });
  t.after(() => first.close());
  await first.ready();
  await submit('g-1');
  const one = (await first.next()).value;
  const second = client.subscribe({ consumer: 'group', from: 'committed', ackEvery: 1 });
  // Nothing was acknowledged yet: a delivery counts as processed once the next is asked for.
  assert.equal((await second.next()).value.cursor, one.cursor);
  await submit('g-2');
  const two = (await second.next()).value;
  await second.close(); // acks the last one handed out
  assert.equal(second.ackedCursor, two.cursor);
  await submit('g-3');
  assert.equal((await first.next()).value.cursor, two.cursor + 1, 'the older member streams again, after the last ack');
  await client.close();
});

for (const [how, slug, restart] of [
  ['a SIGKILL', 'kill', () => server.restart()],
  ['a goodbye (SIGTERM)', 'goodbye', async () => { await server.kill('SIGTERM'); await server.start(false); }],
]) {
  test(`a consumer iterating through ${how} and a restart skips nothing`, async (t) => {
    const client = await connect(t);
    const app = `com.example.consumer.${slug}`;
    const user = 'ck-frank';
    await client.registerApp({ app });
    await client.authorization({ user, app, status: 'authorized', options: ['alert'] });
    const consumer = client.subscribe({ consumer: `through-${slug}`, from: 'committed', filter: { apps: [app] }, reconnect: { initialMs: 50, maxMs: 500 } });
    t.after(() => consumer.close());
    await consumer.ready();
    const n = 400;
    const submit = (from, to) => Promise.all(Array.from({ length: to - from }, (_, k) => client.submit({ app, id: `k-${from + k}`, user, title: 'K', hiddenPreviewsBodyPlaceholder: 'x' })));
    await submit(0, 200);
    const seen = [];
    let rest = null;
    for await (const d of consumer) {
      seen.push(d.notification);
      if (seen.length === 150) {
        // The second half is made after the restart: the consumer must reconnect to see it.
        await restart();
        rest = submit(200, n);
      }
      if (seen.length === n) break;
    }
    await rest;
    assert.deepEqual(seen, Array.from({ length: n }, (_, i) => `k-${i}`));
    assert.ok(consumer.reconnects >= 1, 'the consumer reconnected');
    await client.close();
  });
}
