// Every op round-trips through HeraldClient against a real `herald serve`; pipelined submits
// are acked in order within the bounded window; refusals reject with HeraldError.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { HeraldClient, HeraldError, normalizeWarning } from '../index.js';
import { startServer } from './server.js';

let server;
let client;

before(async () => {
  server = await startServer('ops');
  client = await HeraldClient.connect({ host: server.host, port: server.port, window: 256 });
});

after(async () => {
  await client?.close();
  await server?.stop();
});

function assertStored(ack) {
  assert.equal(typeof ack.seq, 'number');
  assert.equal(ack.partition, 0);
  assert.equal(ack.duplicate, false);
  assert.ok(Array.isArray(ack.warnings));
}

test('hello is granted every role in dev mode', () => {
  assert.deepEqual(client.hello.roles, ['producer', 'settings', 'consumer', 'admin']);
});

test('every op round-trips and is acknowledged with its seq', async () => {
  const app = 'com.example.ops';
  const user = 'ops-alice';
  const acks = await Promise.all([
    client.registerApp({ app, entitlements: ['communication'] }),
    client.authorization({ user, app, status: 'authorized', options: ['alert', 'sound', 'badge'] }),
    client.settings({ user, app, sound: false, delivery: 'immediate' }),
    client.settings({ user, showPreviews: 'whenUnlocked', attentionBudget: null }),
    client.provisionalKeep({ user, app, delivery: 'summary' }),
    client.provisionalTurnOff({ user, app: 'com.example.other' }),
    client.summarySchedule({ user, times: ['08:00', '18:00'], timeZone: 'Europe/Berlin' }),
    client.focusDefine({ user, focus: 'Sleep', allowedPeople: ['mom'], schedule: [{ days: [1, 2, 3, 4, 5, 6, 7], start: '22:00', end: '07:00' }], timeZone: 'Europe/Berlin' }),
    client.focusOn({ user, focus: 'Sleep', until: '2026-03-27T09:00:00Z' }),
    client.focusOff({ user, focus: 'Sleep' }),
    client.mute({ user, app, until: '2026-03-27T06:00:00Z' }),
    client.submit({ app, id: 'ops-1', user, title: 'Hello', hiddenPreviewsBodyPlaceholder: 'Message' }),
    client.snooze({ user, app, id: 'ops-1', until: '2026-03-27T08:00:00Z' }),
    client.opened({ user, app, id: 'ops-1' }),
    client.badgeClear({ user, app }),
    client.withdraw({ app, id: 'ops-1' }),
  ]);
  for (const ack of acks) assertStored(ack);
  const seqs = acks.map((a) => a.seq);
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), 'replies come in request order');
  assert.equal(new Set(seqs).size, seqs.length);

  const clock = await client.clock({ advanceTo: '2026-03-27T07:30:00Z' });
  assertStored(clock);
  assert.equal(clock.now, '2026-03-27T07:30:00Z');
  assert.equal(typeof clock.deliveryHead, 'number');
  const clockByString = await client.clock('2026-03-27T07:31:00Z');
  assert.equal(clockByString.now, '2026-03-27T07:31:00Z');

  const pong = await client.ping();
  assert.equal(pong.op, 'pong');
  const stats = await client.stats();
  assert.equal(stats.op, 'stats');
  assert.ok(stats.eventsCommitted >= acks.length);
});

test('a re-sent submit is acked duplicate with the original seq', async () => {
  const app = 'com.example.dup';
  await client.registerApp({ app });
  const first = await client.submit({ app, id: 'dup-1', user: 'dup-bob', title: 'Once', hiddenPreviewsBodyPlaceholder: 'x' });
  const again = await client.submit({ app, id: 'dup-1', user: 'dup-bob', title: 'Once', hiddenPreviewsBodyPlaceholder: 'x' });
  assert.equal(first.duplicate, false);
  assert.equal(again.duplicate, true);
  assert.equal(again.seq, first.seq);
});

test('warnings come as {code, title, detail} objects, whichever shape the server sent', async () => {
  const app = 'com.example.warn';
  await client.registerApp({ app });
  const ack = await client.submit({ app, id: 'warn-1', user: 'warn-carol', title: 'No placeholder.' });
  const codes = ack.warnings.map((w) => w.code).sort();
  assert.deepEqual(codes, ['missing_hidden_previews_placeholder', 'title_ends_with_punctuation']);
  for (const w of ack.warnings) {
    assert.equal(typeof w.title, 'string');
    assert.ok(w.title.length > 0);
    assert.equal(typeof w.detail, 'string');
  }
  assert.deepEqual(normalizeWarning({ code: 'a', message: 'M' }), { code: 'a', title: 'M', detail: '', message: 'M' });
  assert.deepEqual(normalizeWarning({ code: 'a', title: 'T', detail: 'D' }), { code: 'a', title: 'T', detail: 'D', message: 'T D' });
});

test('a refused op rejects with a HeraldError carrying code, title and detail', async () => {
  await assert.rejects(client.withdraw({ app: 'com.example.none', id: 'never-sent' }), (e) => {
    assert.ok(e instanceof HeraldError);
    assert.equal(e.code, 'unknown_notification');
    assert.ok(e.title.length > 0);
    assert.ok(e.detail.length > 0);
    assert.equal(e.op, 'withdraw');
    return true;
  });
  await assert.rejects(client.submit({ app: 'com.example.ops', user: 'x', title: 't' }), { name: 'HeraldError', code: 'missing_field' });
  // The connection goes on after a refusal.
  assert.equal((await client.ping()).op, 'pong');
});

test('10,000 pipelined submits are acked in order without exceeding the window', async () => {
  const app = 'com.example.bulk';
  await client.registerApp({ app });
  const n = 10_000;
  let maxInFlight = 0;
  const acks = [];
  for (let i = 0; i < n; i++) {
    acks.push(client.submit({ app, id: `bulk-${i}`, user: `bulk-${i % 50}`, title: 'Bulk', hiddenPreviewsBodyPlaceholder: 'x' }));
    maxInFlight = Math.max(maxInFlight, client.inFlight);
  }
  const order = [];
  acks.forEach((p, i) => p.then(() => order.push(i)));
  const results = await Promise.all(acks);
  assert.equal(results.length, n);
  for (let i = 1; i < n; i++) assert.ok(results[i].seq > results[i - 1].seq, `seq ${i} after seq ${i - 1}`);
  assert.ok(results.every((a) => !a.duplicate));
  assert.deepEqual(order, [...order].sort((a, b) => a - b), 'acks resolve in call order');
  assert.ok(maxInFlight <= 256, `in flight ${maxInFlight} stayed within the window`);
  assert.equal(client.inFlight, 0);
});

test('whenWritable holds a loop back while the window is full', async () => {
  const app = 'com.example.window';
  await client.registerApp({ app });
  const acks = [];
  for (let i = 0; i < 2000; i++) {
    await client.whenWritable();
    assert.ok(client.inFlight + client.queued < 256);
    acks.push(client.submit({ app, id: `w-${i}`, user: 'window-dan', title: 'W', hiddenPreviewsBodyPlaceholder: 'x' }));
  }
  assert.equal((await Promise.all(acks)).length, 2000);
});

test('the admin ops: consumers lists a durable consumer, deleteConsumer removes it, erase is acked with its seq', async (t) => {
  const app = 'com.example.admin';
  const user = 'admin-hana';
  await client.registerApp({ app });
  await client.authorization({ user, app, status: 'authorized', options: ['alert'] });
  await Promise.all([0, 1, 2].map((i) => client.submit({ app, id: `adm-${i}`, user, title: 'A', hiddenPreviewsBodyPlaceholder: 'x' })));
  const sub = client.subscribe({ consumer: 'gateway', from: 'earliest', filter: { apps: [app] }, ackEvery: 1 });
  t.after(() => sub.close());
  await sub.ready();
  let last = 0;
  for await (const d of sub) {
    last = d.cursor;
    if (d.notification === 'adm-2') break; // acks it, then closes
  }
  const named = (reply) => reply.consumers.find((c) => c.consumer === 'gateway');
  const waitForMembers = async (count) => {
    for (let i = 0; i < 250; i++) {
      const c = named(await client.consumers());
      if (c && c.members.length === count) return c;
      await new Promise((r) => setTimeout(r, 20));
    }
    return named(await client.consumers());
  };
  const listed = await waitForMembers(0);
  assert.ok(listed, 'gateway is listed');
  assert.deepEqual(listed.partitions.map((p) => [p.partition, p.acked]), [[0, last]]);
  assert.deepEqual(listed.filter, { apps: [app] });
  const deleted = await client.deleteConsumer('gateway');
  assert.equal(deleted.consumer, 'gateway');
  assert.equal(deleted.acked, last);
  assert.equal(named(await client.consumers()), undefined);
  await assert.rejects(client.deleteConsumer('gateway'), { name: 'HeraldError', code: 'unknown_consumer' });

  const erased = await client.erase(user);
  assertStored(erased);
});
