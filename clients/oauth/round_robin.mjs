// A load balancer for the OAuth checks on two replicas: listens on 127.0.0.1:PORT and sends each
// request (not each connection: clients and the browser keep connections alive) to the next of
// the given upstreams in turn, streaming both ways, so every step of a login, a refresh and a
// tool call lands on the other replica from the step before. The Host header is kept (Docket
// checks it against public_base_url, which is this address).
//
// usage: node round_robin.mjs PORT UPSTREAM_URL... ; prints `listening on http://127.0.0.1:PORT`
// and, per request, `METHOD PATH -> replica N`.

import { createServer, request } from 'node:http';

const [port, ...upstreams] = process.argv.slice(2);
if (!port || upstreams.length === 0) {
  process.stderr.write('usage: node round_robin.mjs PORT UPSTREAM_URL...\n');
  process.exit(2);
}
const targets = upstreams.map((upstream) => new URL(upstream));
let next = 0;

const server = createServer((req, res) => {
  const index = next;
  next = (next + 1) % targets.length;
  const target = targets[index];
  process.stdout.write(`${req.method} ${req.url.split('?')[0]} -> replica ${index + 1}\n`);
  const forwarded = request(
    { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  forwarded.on('error', (error) => {
    process.stdout.write(`replica ${index + 1} failed: ${error.message}\n`);
    if (!res.headersSent) res.writeHead(502);
    res.end();
  });
  req.pipe(forwarded);
});
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`listening on http://127.0.0.1:${port}\n`);
});
