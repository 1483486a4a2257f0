// A bare HTTP front of a model server, for scale in the inference benchmark: a node:http server that
// forwards each POST to the upstream over a kept-alive connection and pipes the answer back as it comes,
// without reading it. No auth, agent, records or SDK. Prints its port; runs until killed.
import { Agent, createServer, request } from 'node:http';

const upstream = new URL(process.argv[2]!);
const agent = new Agent({ keepAlive: true });
const server = createServer((req, res) => {
  const forward = request({
    host: upstream.hostname, port: upstream.port, path: `${upstream.pathname.replace(/\/$/, '')}${req.url!.replace(/^\/v1/, '')}`,
    method: req.method, headers: { 'content-type': req.headers['content-type'] ?? 'application/json' }, agent,
  }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, { 'content-type': answer.headers['content-type'] ?? 'application/octet-stream' });
    answer.pipe(res);
  });
  forward.on('error', () => res.destroy());
  req.pipe(forward);
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${(server.address() as { port: number }).port}\n`));
process.on('SIGTERM', () => process.exit(0));
