// herald-client: the producer (HeraldClient) and consumer (Subscription) of Herald's wire protocol.

export { HeraldClient, parseAddress } from './src/client.js';
export { Subscription } from './src/subscription.js';
export { HeraldError } from './src/errors.js';
export { normalizeWarning } from './src/replies.js';
export { RoutingTable, fnv1a64, partitionOf, routingUser } from './src/routing.js';

import { Subscription } from './src/subscription.js';

/** A consumer on a connection of its own: `subscribe({host, port, token, consumer, from, filter})`. */
export function subscribe(options) {
  return new Subscription(options);
}
