/**
 * Sandboxed instances are told apart the way pods are (issue 20): every sandboxed start
 * gets a host name of its own and a pid offset of its own (nextPidOffset), so two instances on one
 * database, or one instance and its restart, never see the same pid and host name. Without
 * it every sandbox (a pid namespace of its own) showed its server the same small pid and
 * the machine's name, and a record scoped by pid or host name looked shared by all of them.
 * And a sandboxed server is reached from two client addresses, as a service behind two
 * proxies is (step 02): through its relay's first socket from 127.0.0.1, its second from 127.3.4.5.
 */
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolveInterpreter } from '../grader/server.js';
import { SECOND_CLIENT_ADDRESS, secondSocketPath } from '../grader/http.js';
import { LiveContext } from '../grader/context.js';
import { makeGraderTempDir } from '../grader/engine.js';
import { chooseSandboxFor, nextPidOffset, PID_OFFSET_MAX, withPidOffset } from '../grader/sandbox.js';
import { grade } from '../grader/engine.js';
import { STEPS } from '../steps/index.js';
import { openWorkspace } from '../lab/workspace.js';
import { fixtureWorkspace } from './support.js';

/** A server that answers every GET with its pid, host name and parent's pid, as `pid host ppid`. */
const WHO_SERVER = `
import os, socket, http.server

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("%d %s %d" % (os.getpid(), socket.gethostname(), os.getppid())).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass

http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
`;

test('withPidOffset runs the command behind a shell that forks the drawn number of times, then forks it and waits', () => {
  const command = withPidOffset(['python3', 'server.py'], 7);
  assert.deepEqual(command.slice(0, 2), ['/bin/sh', '-c']);
  assert.match(command[2], /-lt 7 \]/);
  assert.match(command[2], /\(exec "\$@"\); exit \$\?$/, 'a subshell of its own execs the command: its pid moves too');
  assert.deepEqual(command.slice(3), ['sh', 'python3', 'server.py']);
  assert.ok(PID_OFFSET_MAX >= 16, 'enough offsets for the starts of one check');
});

test('successive starts take successive pid offsets: no two of PID_OFFSET_MAX starts in a row share one', () => {
  const offsets = Array.from({ length: PID_OFFSET_MAX }, () => nextPidOffset());
  assert.ok(offsets.every((o) => o >= 1 && o <= PID_OFFSET_MAX), offsets.join(', '));
  assert.equal(new Set(offsets).size, PID_OFFSET_MAX, offsets.join(', '));
});

test('four sandboxed starts of one workspace: each sees a host name, a pid and a parent pid of its own', async () => {
  const ws = fixtureWorkspace('reference', {});
  fs.writeFileSync(path.join(ws.dir, 'server.py'), WHO_SERVER);
  const tmp = makeGraderTempDir('lab-');
  const { command } = openWorkspace(ws.dir);
  const resolved = await resolveInterpreter(command, ws.dir);
  const { sandbox } = await chooseSandboxFor('auto');
  const ctx = new LiveContext(ws.dir, tmp, '06', sandbox ? { ...resolved, sandbox } : resolved, 1);
  try {
    const servers = [];
    for (let i = 0; i < 4; i++) servers.push(await ctx.startServer({ ownCopy: true }));
    if (!servers.every((s) => s.sandboxed)) {
      // Without a sandbox the servers share the machine's pid space and name: nothing to assert here.
      return;
    }
    const who = await Promise.all(servers.map(async (s) => (await ctx.request(s, 'GET', '/who')).responseBody ?? ''));
    const pids = who.map((w) => Number(w.split(' ')[0]));
    const hosts = who.map((w) => w.split(' ')[1]);
    assert.ok(pids.every((p) => Number.isInteger(p) && p > 0), who.join(', '));
    assert.equal(new Set(hosts).size, hosts.length, `a host name per start: ${hosts.join(', ')}`);
    // Four successive starts take four different offsets (nextPidOffset): four different pids.
    assert.equal(new Set(pids).size, pids.length, `a pid per start: ${pids.join(', ')}`);
    // And four different parents: the relay is forked after the offset too, as each pod's
    // supervisor is a process of its own (a record scoped by os.getppid() is not shared).
    const parents = who.map((w) => Number(w.split(' ')[2]));
    assert.equal(new Set(parents).size, parents.length, `a parent's pid per start: ${parents.join(', ')}`);
  } finally {
    await ctx.stopAll();
    fs.rmSync(tmp, { recursive: true, force: true });
    ws.remove();
  }
});

// Records scoped by pid, by host name or by the parent's pid, graded sandboxed: step 06's restart (a new start)
// and its second instance find no record, and the retry is charged again.
for (const solution of ['scoped-by-pid', 'pods/scoped-by-hostname', 'pods/scoped-by-parent-pid']) {
  test(`${solution}, sandboxed, fails 06: a restart and another instance are other pods`, async () => {
    const { sandbox } = await chooseSandboxFor('auto');
    if (!sandbox) return; // No sandbox here: instances share the machine's name (and pids differ anyway).
    const ws = fixtureWorkspace(solution);
    try {
      const { command } = openWorkspace(ws.dir);
      const resolved = await resolveInterpreter(command, ws.dir);
      const [result] = await grade({ workspace: ws.dir, steps: STEPS.filter((s) => s.id === '06'), command: { ...resolved, sandbox } });
      assert.equal(result.status, 'fail', result.message);
      assert.match(result.message, /^(After a restart|On B|A retry on another instance|.*instance).*(stored first response back unchanged|first response again)/);
    } finally {
      ws.remove();
    }
  });
}

/** A server that answers every GET with the client address of the connection, as Python's http.server sees it. */
const PEER_SERVER_PY = `
import os, http.server

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = self.client_address[0].encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass

http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
`;

/** The same in Node.js (its server runs behind relay.js, not relay.py). */
const PEER_SERVER_NODE = `
import http from 'node:http';
http.createServer((req, res) => res.end(req.socket.remoteAddress.replace(/^::ffff:/, ''))).listen(Number(process.env.PORT), '127.0.0.1');
`;

// Step 02 retries from a second client address (issue 20): a sandboxed server is reached
// through its relay, whose second socket (SOCKET.other) connects from 127.3.4.5. Both relays
// (relay.py for a Python server, relay.js for any other) make it.
for (const [relay, file, source, config] of [
  ['relay.py', 'server.py', PEER_SERVER_PY, undefined],
  ['relay.js', 'server.mjs', PEER_SERVER_NODE, { server: ['node', 'server.mjs'] }],
] as const) {
  test(`sandboxed behind ${relay}: a second client's requests come from ${SECOND_CLIENT_ADDRESS} through the relay's second socket, the others from 127.0.0.1`, async () => {
    const { sandbox } = await chooseSandboxFor('auto');
    if (!sandbox) return; // No sandbox here: the grader binds the address itself (the fixture matrix grades that).
    const ws = fixtureWorkspace('reference', {});
    fs.writeFileSync(path.join(ws.dir, file), source);
    if (config) fs.writeFileSync(path.join(ws.dir, 'idem-lab.json'), JSON.stringify(config));
    const tmp = makeGraderTempDir('lab-');
    const { command } = openWorkspace(ws.dir);
    const resolved = await resolveInterpreter(command, ws.dir);
    const ctx = new LiveContext(ws.dir, tmp, '02', { ...resolved, sandbox }, 1);
    try {
      const server = await ctx.startServer();
      assert.ok(server.sandboxed && server.socketPath, 'reached through a relay');
      assert.ok(fs.lstatSync(secondSocketPath(server.socketPath)).isSocket(), "the relay's second socket is there once its first is");
      const usual = await ctx.request(server, 'GET', '/peer');
      const second = await ctx.request(server, 'GET', '/peer', { body: '', client: 'second' });
      assert.equal(usual.responseBody, '127.0.0.1');
      assert.equal(usual.client, undefined);
      assert.equal(second.responseBody, SECOND_CLIENT_ADDRESS, JSON.stringify(second));
      assert.deepEqual(second.client, { address: SECOND_CLIENT_ADDRESS });
    } finally {
      await ctx.stopAll();
      fs.rmSync(tmp, { recursive: true, force: true });
      ws.remove();
    }
  });
}

// Step 02 graded sandboxed, through both relay sockets: the reference (relay.py) and the
// Node.js server (relay.js) replay a retry from the second client address with no warning
// that it came from 127.0.0.1; a server that scopes its records by the client's address fails.
for (const [solution, expected] of [
  ['reference', undefined],
  ['ok-node-server', undefined],
  ['scoped-by-client-address', /^From a second client address, 127\.3\.4\.5 \(the first request came from 127\.0\.0\.1\): .*stored first response back unchanged/],
] as const) {
  test(`${solution}, sandboxed, ${expected ? 'fails' : 'passes'} 02: its retry from ${SECOND_CLIENT_ADDRESS} goes through the relay's second socket`, async () => {
    const { sandbox } = await chooseSandboxFor('auto');
    if (!sandbox) return;
    const ws = fixtureWorkspace(solution);
    try {
      const { command } = openWorkspace(ws.dir);
      const resolved = await resolveInterpreter(command, ws.dir);
      const [result] = await grade({ workspace: ws.dir, steps: STEPS.filter((s) => s.id === '02'), command: { ...resolved, sandbox } });
      assert.equal(result.status, expected ? 'fail' : 'pass', result.message);
      if (expected) assert.match(result.message, expected);
      assert.ok(!result.warnings.some((w) => w.includes(SECOND_CLIENT_ADDRESS)), `no fallback to 127.0.0.1: ${result.warnings.join('\n')}`);
      if (expected) {
        const fromSecond = result.exchanges.find((e) => e.client);
        assert.deepEqual(fromSecond?.client, { address: SECOND_CLIENT_ADDRESS }, 'the failing retry came from the second address');
      }
    } finally {
      ws.remove();
    }
  });
}

/**
 * A server that scopes its records by client address and, at each payment, removes the
 * relay's second socket (its parent's command line names SOCKET; the sandbox shares that
 * folder with the relay). When the grader is not root, relay and server are one user and the
 * removal works: without the grader's guard the retry came from 127.0.0.1 with a warning and
 * the wrong server passed 02; now 02 is inconclusive. As root the relay made its sockets as
 * root before dropping to the sandbox's user, the removal is refused, and the retry from
 * 127.3.4.5 fails 02. (wire.test asserts the flag the guard reads, relayMissing.)
 */
const UNLINKS_SECOND_SOCKET = `

def remove_second_socket():
    try:
        with open("/proc/%d/cmdline" % os.getppid(), "rb") as f:
            args = f.read().split(b"\\0")
        relay = next(i for i, a in enumerate(args) if a.endswith(b"relay.py"))
        os.unlink(args[relay + 1].decode() + ".other")
    except (OSError, StopIteration, IndexError):
        pass


scoped_handle_pay = handle_pay


def handle_pay(key, payload):
    remove_second_socket()
    return scoped_handle_pay(key, payload)
`;

test("a server that removes the relay's second socket does not pass 02 by it: no verdict (inconclusive), never a pass", async () => {
  const { sandbox } = await chooseSandboxFor('auto');
  if (!sandbox) return;
  const ws = fixtureWorkspace('scoped-by-client-address');
  try {
    const file = path.join(ws.dir, 'server.py');
    const END = '# --- handle_pay: the part you edit ends here ---';
    const source = fs.readFileSync(file, 'utf8');
    assert.ok(source.includes(END));
    fs.writeFileSync(file, source.replace(END, `${UNLINKS_SECOND_SOCKET}\n${END}`));
    const { command } = openWorkspace(ws.dir);
    const resolved = await resolveInterpreter(command, ws.dir);
    const [result] = await grade({ workspace: ws.dir, steps: STEPS.filter((s) => s.id === '02'), command: { ...resolved, sandbox } });
    assert.notEqual(result.status, 'pass', result.message);
    // Where the sandbox let the server remove it, 02 says so; where not, the retry came from 127.3.4.5 and failed it.
    if (result.status === 'error') {
      assert.equal(result.inconclusive, true);
      assert.match(result.message, /the second socket of the sandbox's relay was gone/);
    } else {
      assert.match(result.message, /^From a second client address, 127\.3\.4\.5/);
    }
  } finally {
    ws.remove();
  }
});

