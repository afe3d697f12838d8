// Pipelined acked submits per second on one connection (a bench, not a test).
//   HERALD_ADDR=127.0.0.1:7411 [HERALD_TOKEN=…] [N=100000] [WINDOW=1024] node clients/node/bench.js

import { HeraldClient } from './index.js';

const address = process.env.HERALD_ADDR ?? '127.0.0.1:7411';
const token = process.env.HERALD_TOKEN || undefined;
const n = Number(process.env.N ?? 100_000);
const window = Number(process.env.WINDOW ?? 1024);

const client = await HeraldClient.connect({ address, token, window });
const run = `${Date.now().toString(36)}-${process.pid}`;
const app = `com.example.bench.${run}`;
await client.registerApp({ app });

const started = process.hrtime.bigint();
let acked = 0;
let failed = 0;
for (let i = 0; i < n; i++) {
  if (client.queued > 0 || client.inFlight >= window) await client.whenWritable();
  client.submit({ app, id: `b-${i}`, user: `bench-${i % 1000}`, title: 'Bench', hiddenPreviewsBodyPlaceholder: 'Bench' })
    .then(() => { acked += 1; }, () => { failed += 1; });
}
await client.close();
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
console.log(`bench: ${acked} submits acked (${failed} refused) in ${seconds.toFixed(2)} s on one connection, window ${window}: ${Math.round(acked / seconds)}/s`);
if (failed > 0) process.exit(1);
