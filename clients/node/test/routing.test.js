// Routing by partition: the partition function against the shared fixture, the routing table, and real servers.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HeraldClient, RoutingTable, fnv1a64, partitionOf, routingUser } from '../index.js';
import { HeraldError } from '../src/errors.js';
import { HERALD_BINARY, freePort, startServer } from './server.js';

const fixture = JSON.parse(readFileSync(new URL('../../testdata/partitions.json', import.meta.url), 'utf8'));
const APP = 'com.example.routing';

// The fixture's users a server takes: not empty, and in NFC (the server refuses other spellings of a name).
const serverCases = fixture.cases.filter((c) => c.user !== '' && c.user.normalize('NFC') === c.user);
const userIn = (partition, partitions) => fixture.cases.find((c) => c.partitions[String(partitions)] === partition).user;
const hello = (partitions, routes, hash = 'fnv1a64') => ({ ok: true, op: 'hello', partitions, hash, routes });

test('every user of the fixture hashes and falls in the fixture\'s partition', () => {
  assert.ok(fixture.cases.some((c) => c.user === '') && fixture.cases.some((c) => /[^\x00-\x7f]/.test(c.user)));
  for (const c of fixture.cases) {
    assert.equal(fnv1a64(c.user).toString(16).padStart(16, '0'), c.fnv1a64, JSON.stringify(c.user));
    for (const [p, expected] of Object.entries(c.partitions)) assert.equal(partitionOf(c.user, Number(p)), expected, `${JSON.stringify(c.user)} mod ${p}`);
  }
});

test('routes send each user\'s requests to its partition\'s owner', () => {
  const table = RoutingTable.fromHello(hello(4, [
    { partition: 0, address: 'a:1', epoch: 1 }, { partition: 1, address: 'b:1', epoch: 1 },
    { partition: 2, address: 'a:1', epoch: 2 }, { partition: 3, address: 'c:1', epoch: 1 },
  ]), 'a:1');
  assert.ok(table.direct);
  assert.equal(table.addressFor(userIn(0, 4)), null); // owned by the instance connected to
  assert.equal(table.addressFor(userIn(1, 4)), 'b:1');
  assert.equal(table.addressFor(userIn(2, 4)), null);
  assert.equal(table.addressFor(userIn(3, 4)), 'c:1');
  assert.equal(table.addressFor(null), null); // no user: the connected instance forwards
  const moved = table.withOwner(1, 'c:1');
  assert.equal(moved.addressFor(userIn(1, 4)), 'c:1');
});

test('one partition, routes naming only the connected instance, or an unknown hash route nothing', () => {
  const single = RoutingTable.fromHello(hello(1, [{ partition: 0, address: 'a:1', epoch: 3 }]), 'a:1');
  assert.ok(!single.direct && single.addressFor('alice') === null);
  const local = RoutingTable.fromHello(hello(4, { 0: { address: 'a:1' }, 1: { address: 'a:1' }, 2: { address: 'a:1' }, 3: { address: 'a:1' } }), 'a:1');
  assert.ok(!local.direct);
  const other = RoutingTable.fromHello(hello(4, ['a:1', 'b:1', 'b:1', 'b:1'], 'murmur3'), 'a:1');
  assert.ok(!other.direct && other.addressFor(userIn(1, 4)) === null);
  assert.equal(RoutingTable.fromHello(null, 'a:1').partitions, 1);
});

test('requests route by their user; fan-outs and admin ops do not; not_owner carries the owner', () => {
  assert.equal(routingUser({ id: '1', app: APP, user: 'alice' }), 'alice');
  assert.equal(routingUser({ id: '1', app: APP, users: ['alice', 'bob'] }), null);
  assert.equal(routingUser({ app: APP, id: '1' }), null);
  assert.equal(routingUser({}), null);
  const e = HeraldError.fromReply({ ok: false, rid: 3, error: { code: 'not_owner', title: 't', owner: 'b:7411' } });
  assert.equal(e.owner, 'b:7411');
});

test('with one partition the routes name the connected instance and no other connection opens', async () => {
  const server = await startServer('routing');
  try {
    const client = await HeraldClient.connect({ address: server.address });
    assert.equal(client.hello.partitions, 1);
    assert.equal(client.hello.hash, 'fnv1a64');
    assert.deepEqual(client.hello.routes.map((r) => r.address), [server.address]);
    await client.registerApp({ app: APP });
    const acks = await Promise.all(serverCases.map((c, i) => client.submit({
      id: `route-${i}`, app: APP, user: c.user, title: 'Hi', hiddenPreviewsBodyPlaceholder: 'Hi',
    })));
    assert.ok(acks.every((a) => a.partition === 0));
    assert.ok(!client.routes.direct);
    assert.equal(client._owners.size, 0);
    const again = await client.refreshRoutes();
    assert.deepEqual(again.routes, client.hello.routes);
    await client.close();
  } finally {
    await server.stop();
  }
});

test('with four partitions on two instances each user is acked in its partition', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'herald-node-partitions-'));
  const database = `nodeclient_partitions_${process.pid}`;
  const servers = [];
  try {
    execFileSync(HERALD_BINARY, ['migrate', '--private-database', database, '--partitions', '4'], { cwd: dir, stdio: 'pipe' });
    for (const name of ['a', 'b']) {
      try {
        servers.push(await startServer(name, { dir, database, fresh: false, args: ['--instance', name, '--advertise', '127.0.0.1:{port}'] }));
      } catch (e) {
        if (/partitions/.test(String(e.message))) {
          t.skip(`herald serve does not serve a database of 4 partitions yet: ${String(e.message).split('\n').filter((l) => /partitions/.test(l)).pop()?.slice(-300)}`);
          return;
        }
        throw e;
      }
    }
    const [a, b] = servers;
    const client = await HeraldClient.connect({ address: a.address });
    const deadline = Date.now() + 30_000;
    const addresses = () => new Set((client.hello.routes ?? []).map((r) => r.address));
    const shared = () => addresses().size === 2 && !addresses().has(null) && !addresses().has(undefined);
    while (!shared() && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      await client.refreshRoutes();
    }
    assert.equal(client.hello.partitions, 4);
    assert.deepEqual([...addresses()].sort(), [a.address, b.address].sort());
    await client.registerApp({ app: APP });
    const cases = serverCases;
    await Promise.all(cases.map((c) => client.authorization({ user: c.user, app: APP, status: 'authorized', options: ['alert'] })));
    const acks = await Promise.all(cases.map((c, i) => client.submit({
      id: `p-${i}`, app: APP, user: c.user, title: 'Hi', hiddenPreviewsBodyPlaceholder: 'Hi',
    })));
    cases.forEach((c, i) => assert.equal(acks[i].partition, c.partitions['4'], JSON.stringify(c.user)));
    // Users of partitions owned by b went on a connection to b.
    assert.deepEqual([...client._owners.keys()], [b.address]);

    await client.close();
  } finally {
    for (const s of servers) await s.stop();
    // migrate started the private PostgreSQL cluster; stop it if no server did.
    try { process.kill(Number(readFileSync(path.join(dir, '.herald', 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]), 'SIGTERM'); } catch { /* stopped */ }
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Runs SQL on a test server's private database (its cluster under server.dir, trust auth as postgres). */
function psql(server, database, sql) {
  const port = readFileSync(path.join(server.dir, '.herald', 'postgres', 'postmaster.pid'), 'utf8').split('\n')[3].trim();
  return execFileSync('psql', [`postgresql://postgres@127.0.0.1:${port}/${database}`, '-XAtq', '-c', sql], { encoding: 'utf8' }).trim();
}

const submitFor = (id, user) => ({ id, app: APP, user, title: 'Hi', hiddenPreviewsBodyPlaceholder: 'Hi' });

test('a submit refused with not_owner after a lease takeover is sent again and stored once the partition is served', async () => {
  const server = await startServer('routing-fenced');
  try {
    const client = await HeraldClient.connect({ address: server.address, reconnect: { initialMs: 50, maxMs: 500 } });
    await client.registerApp({ app: APP });
    // Another instance takes the partition: the next append is refused (`not_owner`) and this
    // instance stops; started again, it takes the partition back.
    psql(server, 'nodeclient_routing-fenced', "UPDATE partitions SET epoch = epoch + 1, owner = 'other', address = '127.0.0.1:1' WHERE partition = 0");
    const exited = new Promise((resolve) => server.process.once('exit', resolve));
    const acked = client.submit(submitFor('fenced-1', 'fenced'));
    await exited;
    await server.start(false);
    const ack = await acked;
    assert.ok(ack.seq > 0 && !ack.duplicate);
    assert.equal(client.notOwnerResends, 1);
    assert.equal(psql(server, 'nodeclient_routing-fenced', "SELECT count(*) FROM events WHERE notification_id = 'fenced-1'"), '1');
    await client.close();
  } finally {
    await server.stop();
  }
});

test('an owner that cannot be reached leaves its requests to the connected instance; an owner elsewhere gets its partitions\' requests', async () => {
  const [server, owner] = await Promise.all([startServer('routing-first'), startServer('routing-owner')]);
  try {
    const dead = `127.0.0.1:${await freePort()}`;
    const users = [0, 1, 2, 3].map((p) => userIn(p, 4) || 'x');
    const fakeRoutes = (other) => ({ ...hello(4, [0, 1, 2, 3].map((p) => ({ partition: p, address: p % 2 === 0 ? server.address : other, epoch: 1 }))), ok: true });

    // Routes as a server of four partitions would give them: 1 and 3 owned where nothing listens.
    const client = await HeraldClient.connect({ address: server.address, reconnect: { initialMs: 10, maxMs: 50 } });
    await client.registerApp({ app: APP });
    client.hello = fakeRoutes(dead);
    const acks = await Promise.all(users.map((u, i) => client.submit(submitFor(`dead-${i}`, u))));
    assert.ok(acks.every((a) => a.seq > 0));
    assert.deepEqual([...client._owners], [[dead, null]]);
    assert.ok((await client.submit(submitFor('dead-later', users[1]))).seq > 0, 'later requests go to the connected instance at once');
    await client.close();

    // 1 and 3 owned by the other server: their submits are stored there (sent there again, a duplicate).
    const direct = await HeraldClient.connect({ address: owner.address, routing: false });
    await direct.registerApp({ app: APP });
    const routed = await HeraldClient.connect({ address: server.address });
    routed.hello = fakeRoutes(owner.address);
    for (const [i, u] of users.entries()) await routed.submit(submitFor(`owned-${i}`, u));
    assert.deepEqual([...routed._owners.keys()], [owner.address]);
    await routed.close();
    const first = await HeraldClient.connect({ address: server.address, routing: false });
    for (const [c, stored] of [[first, [0, 2]], [direct, [1, 3]]]) {
      for (const [i, u] of users.entries()) {
        const again = await c.submit(submitFor(`owned-${i}`, u));
        assert.equal(again.duplicate, stored.includes(i), `${i} on ${c.options.port}`);
      }
    }
    await first.close();
    await direct.close();
  } finally {
    await Promise.all([server.stop(), owner.stop()]);
  }
});
