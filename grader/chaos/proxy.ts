/**
 * A lossy TCP proxy on loopback (node:net), between a client and a server: for each
 * connection it asks what the network does to it (a Fate, faults.ts) and then passes the
 * bytes on, holds them back, or resets the connection before the request reaches the
 * server or after the server has answered. It reads no HTTP: a connection carries one
 * request, and its fate is looked up by the client's local port when its first bytes
 * arrive, so the client names each connection's fate once it is open and before it writes.
 */
import net from 'node:net';
import { openConnection } from '../http.js';
import type { Fate } from './faults.js';

/** Where the proxy passes connections on: 127.0.0.1:port, or the Unix socket that leads there (a sandboxed server's relay). */
export interface Upstream {
  port: number;
  socketPath?: string;
}

/** What happened on one connection through the proxy. */
export interface ProxiedConnection {
  /** The client's local port (the key its fate was looked up by). */
  clientPort: number;
  fate: Fate;
  /** Whether bytes of the request were passed on to the server. */
  reachedServer: boolean;
  /** Whether the server's response began to come back (and, unless the response was lost, was passed on). */
  serverAnswered: boolean;
}

/** Options of startLossyProxy. */
export interface ProxyOptions {
  upstream: Upstream;
  /** The fate of the connection from this client port; undefined: it passes untouched. */
  fateOf(clientPort: number): Fate | undefined;
  /** How long opening the connection to the server may take, ms (default 2000). */
  connectMs?: number;
}

const PASS: Fate = { loss: 'none', delayMs: 0 };

/** A running lossy proxy. */
export interface LossyProxy {
  /** The port it listens on, on 127.0.0.1. */
  port: number;
  /** Every connection it accepted that sent bytes, in the order their first bytes came. */
  connections: ProxiedConnection[];
  /** Stops listening and resets every connection still open (both sides); resolves once closed. Idempotent; never throws. */
  close(): Promise<void>;
}

/** Resets a socket (TCP RST) when it can, else destroys it. */
function reset(socket: net.Socket): void {
  if (socket.destroyed) return;
  try {
    socket.resetAndDestroy();
  } catch {
    socket.destroy();
  }
}

/**
 * Starts a lossy proxy on a free port of 127.0.0.1 in front of `options.upstream`.
 * - loss `request`: the client's bytes are read and thrown away, and its connection is
 *   reset; the server never sees the request.
 * - loss `response`: the request is passed on; when the server's first response bytes
 *   come back (the server has done the work and answered), both connections are reset
 *   and the response is thrown away.
 * - `delayMs`: the request is held back that long before the connection to the server is
 *   opened; a client that gives up meanwhile takes its request with it.
 * A server that cannot be reached resets the client's connection.
 * @throws Error when it cannot listen
 */
export async function startLossyProxy(options: ProxyOptions): Promise<LossyProxy> {
  const open = new Set<net.Socket>();
  const connections: ProxiedConnection[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let closed = false;
  const track = (socket: net.Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    socket.on('error', () => reset(socket));
  };

  const server = net.createServer((client) => {
    track(client);
    let record: ProxiedConnection | undefined;
    let upstream: net.Socket | undefined;
    const pending: Buffer[] = [];
    const end = () => {
      reset(client);
      if (upstream) reset(upstream);
    };
    client.once('close', () => {
      if (upstream) reset(upstream);
    });
    client.on('data', (chunk: Buffer) => {
      if (record === undefined) {
        const fate = options.fateOf(client.remotePort ?? 0) ?? PASS;
        record = { clientPort: client.remotePort ?? 0, fate, reachedServer: false, serverAnswered: false };
        connections.push(record);
        if (fate.loss === 'request') return end();
        const connect = () => void pass(record!);
        if (fate.delayMs > 0) {
          const timer = setTimeout(() => {
            timers.delete(timer);
            connect();
          }, fate.delayMs);
          timers.add(timer);
          client.once('close', () => {
            clearTimeout(timer);
            timers.delete(timer);
          });
        } else connect();
      }
      if (record.fate.loss === 'request') return;
      if (upstream && !upstream.connecting) upstream.write(chunk);
      else pending.push(chunk);
    });
    client.on('end', () => upstream?.end());

    async function pass(rec: ProxiedConnection): Promise<void> {
      if (client.destroyed || closed) return;
      let socket: net.Socket;
      try {
        socket = await openConnection(options.upstream, options.connectMs ?? 2000);
      } catch {
        return end();
      }
      if (client.destroyed || closed) return reset(socket);
      upstream = socket;
      track(socket);
      socket.on('data', (chunk: Buffer) => {
        rec.serverAnswered = true;
        if (rec.fate.loss === 'response') return end();
        client.write(chunk);
      });
      socket.on('end', () => client.end());
      socket.once('close', () => reset(client));
      for (const chunk of pending.splice(0)) socket.write(chunk);
      rec.reachedServer = true;
      if (client.readableEnded) socket.end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  let closing: Promise<void> | undefined;
  return {
    port,
    connections,
    close() {
      closing ??= new Promise<void>((resolve) => {
        closed = true;
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        server.close(() => resolve());
        for (const socket of open) reset(socket);
      });
      return closing;
    },
  };
}
