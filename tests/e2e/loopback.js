// Preloaded into the Agents Playground (node -r ./tests/e2e/loopback.js cli.js ...): a server that names no
// host listens on 127.0.0.1 instead of every interface. The Playground's CLI has no host option, and a
// local emulator for one developer has no business being reachable from the network.
'use strict';
const net = require('net');

const LOOPBACK = process.env.PLAYGROUND_HOST || '127.0.0.1';
const listen = net.Server.prototype.listen;

net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    if (typeof args[1] !== 'string') args.splice(1, 0, LOOPBACK); // listen(port[, backlog][, callback])
  } else if (first && typeof first === 'object' && !first._handle && first.fd === undefined
             && first.path === undefined && first.host === undefined) {
    args[0] = { ...first, host: LOOPBACK }; // listen({ port }[, callback])
  }
  return listen.apply(this, args);
};
