/**
 * A free port is only free until a server binds it: another grader or test process may
 * bind it first. Unsandboxed, GET /health on that port is then answered by the stranger,
 * and a check would grade another learner's server (seen in CI as a keyless retry on B
 * answered 400 by a server without the keyless window, and as "connection refused" on a
 * server that was up). startServer must notice that the listener is not its own server and
 * start it on another port.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_COMMAND, listensItself, resolveInterpreter, startServer, type ServerInstance } from '../grader/server.js';
import { send } from '../grader/http.js';
import { serverSource } from '../fixtures/build.js';
import { tempDir } from './support.js';

/** A stranger's server on a free port of 127.0.0.1 that answers every request 200 {"ok": true}, as a healthy lab server does. */
async function stranger(): Promise<{ port: number; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(req.url === '/health' ? '{"ok": true}' : '{"stranger": true}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  assert.ok(address && typeof address === 'object');
  return {
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

test("a server whose port a stranger bound first is started on another port: the stranger's GET /health does not count", async () => {
  const tmp = tempDir('idem-lab-foreign-port-');
  const other = await stranger();
  let server: ServerInstance | undefined;
  try {
    fs.writeFileSync(path.join(tmp.dir, 'server.py'), serverSource('reference'));
    server = await startServer({ workspace: tmp.dir, dbPath: path.join(tmp.dir, 'lab.db'), label: 'A', firstPort: other.port, command: await resolveInterpreter(DEFAULT_COMMAND, tmp.dir) });
    assert.notEqual(server.port, other.port, "the instance is not reached on the stranger's port");
    assert.ok(listensItself(server), 'the instance listens on its port itself');
    const ledger = await send({ label: 'A', port: server.port }, 'GET', '/ledger', undefined, { connectMs: 2000, answerMs: 5000 });
    assert.equal(ledger.status, 200);
    assert.deepEqual(JSON.parse(ledger.responseBody ?? ''), [], "the ledger is the instance's own (empty), not the stranger's answer");
    assert.equal(server.hasExited, false);
  } finally {
    await server?.stop();
    await other.close();
    tmp.remove();
  }
});

test('listensItself tells a listener of the instance from one of another process', async () => {
  const other = await stranger();
  try {
    // This test's process holds the stranger's listener: no process of the (absent) instance does.
    assert.equal(listensItself({ pid: 999_999_999, port: other.port, dbPath: '/nonexistent/lab.db' }), false);
    // A port nobody listens on says nothing against the instance.
    await other.close();
    assert.equal(listensItself({ pid: 999_999_999, port: other.port, dbPath: '/nonexistent/lab.db' }), true);
  } finally {
    await other.close().catch(() => undefined);
  }
});
