/**
 * The relay a sandboxed server runs behind when its sandbox has a network namespace of its
 * own (no network but loopback): run inside the sandbox as
 *
 *   node relay.js SOCKET PORT FILE [ARGS...]
 *
 * it starts FILE ARGS (the server, in the same process group, with the same environment
 * and output), listens on the Unix socket SOCKET (in the folder the grader shares with the
 * sandbox), and joins every connection made there to 127.0.0.1:PORT inside the sandbox.
 * It also listens on SOCKET.other (made before SOCKET), whose connections reach the server
 * from the client address 127.3.4.5 instead of 127.0.0.1: a second client, as a retry
 * from another machine or proxy is; where 127.3.4.5 cannot be bound, SOCKET.other is not
 * made. A connection the server refuses is closed. It exits when the server exits, with its
 * exit code (128 + the signal's number after a signal); SIGTERM and SIGINT reach the
 * server through the process group, so the relay itself waits for the server to end.
 * Engine code only: no lab specifics.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import os from 'node:os';

const [socketPath, portText, file, ...args] = process.argv.slice(2);
const port = Number(portText);
if (!socketPath || !Number.isInteger(port) || !file) {
  process.stderr.write('usage: relay.js SOCKET PORT FILE [ARGS...]\n');
  process.exit(2);
}

for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => undefined);

const child = spawn(file, args, { stdio: 'inherit' });
child.on('error', (err) => {
  process.stderr.write(`cannot start ${file}: ${err.message}\n`);
  process.exit(127);
});
child.on('exit', (code, signal) => {
  process.exit(code ?? 128 + (signal ? (os.constants.signals[signal] ?? 0) : 0));
});

/** The address connections made on SOCKET.other come from (any 127.x.y.z is loopback). */
const SECOND_CLIENT = '127.3.4.5';

/** A relay server whose connections reach the server from `localAddress` (undefined: the default, 127.0.0.1). */
const relayFrom = (localAddress?: string) => net.createServer((conn) => {
  const upstream = net.connect({ host: '127.0.0.1', port, ...(localAddress ? { localAddress } : {}) });
  const end = () => {
    conn.destroy();
    upstream.destroy();
  };
  conn.on('error', end).on('close', end);
  upstream.on('error', end).on('close', end);
  conn.pipe(upstream);
  upstream.pipe(conn);
});

/** Whether a TCP socket can be bound to `address` here: tried with a listener on port 0, closed at once. */
function bindable(address: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    probe.listen(0, address, () => probe.close(() => resolve(true)));
  });
}

// The second client's socket first: the grader takes SOCKET's presence for both. Without it
// the grader sends the second client's requests through SOCKET, and says so.
// SOCKET is listened on once SOCKET.other listens (or could not), as relay.py does.
void bindable(SECOND_CLIENT)
  .then(
    (ok) =>
      new Promise<void>((done) => {
        if (!ok) return done();
        const other = relayFrom(SECOND_CLIENT);
        other.once('error', () => done());
        other.listen(`${socketPath}.other`, () => done());
      }),
  )
  .then(() => {
    const relay = relayFrom();
    relay.on('error', (err) => process.stderr.write(`relay: ${err.message}\n`));
    relay.listen(socketPath);
  });
