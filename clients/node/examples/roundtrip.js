// The shortest complete use of herald-client: register an app, authorize a user, pipeline N
// submits, read their N deliveries through a fresh consumer.
//   HERALD_ADDR=127.0.0.1:7411 [HERALD_TOKEN=…] [N=1000] node clients/node/examples/roundtrip.js

import { HeraldClient } from '../index.js';

const address = process.env.HERALD_ADDR ?? '127.0.0.1:7411';
const token = process.env.HERALD_TOKEN || undefined;
const n = Number(process.env.N ?? 1000);

async function main() {
  const client = await HeraldClient.connect({ address, token });
  const run = `${Date.now().toString(36)}-${process.pid}`;
  const app = `com.example.roundtrip.${run}`;
  const user = `roundtrip-user-${run}`;
  await client.registerApp({ app });
  await client.authorization({ user, app, status: 'authorized', options: ['alert', 'sound', 'badge'] });

  // A fresh consumer starts at the head, so it sees exactly the deliveries that follow.
  const consumer = client.subscribe({ consumer: `roundtrip-${run}`, from: 'committed', filter: { apps: [app] } });
  await consumer.ready();

  const acks = [];
  for (let i = 0; i < n; i++) {
    acks.push(client.submit({ app, id: `n-${i}`, user, title: `Roundtrip ${i}`, hiddenPreviewsBodyPlaceholder: 'Roundtrip' }));
  }
  const acked = (await Promise.all(acks)).length;

  let delivered = 0;
  if (n > 0) {
    for await (const delivery of consumer) {
      if (delivery.user === user) delivered += 1;
      if (delivered === n) break;
    }
  } else {
    await consumer.close();
  }
  await client.close();
  console.log(`roundtrip: ${acked} acked, ${delivered} delivered`);
}

main().catch((error) => {
  console.error(`roundtrip failed: ${error.code ? `${error.code}: ${error.title} ${error.detail}` : error.stack ?? error}`);
  process.exit(1);
});
