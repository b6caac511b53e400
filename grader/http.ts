import fs from 'node:fs';
import net from 'node:net';
import { createRequire } from 'node:module';
import type { Client as UndiciClient } from 'undici';

/**
 * undici's HTTP/1.1 client alone, with the request API its index gives every dispatcher
 * (undici 7.30.2, pinned: the package has no `exports` map, so its files can be loaded one
 * by one; index.js does the same Object.assign). The index loads fetch, WebSocket, caches
 * and mocks as well, which takes a tenth of a second at every command's start-up. Even
 * these files take about 40 ms, so they are loaded on first use, or by loadHttpClient
 * while a server is starting, not when the command line starts.
 */
let undiciClient: typeof UndiciClient | undefined;

/** Loads undici's client now, if not yet loaded (synchronous; about 40 ms once): call it while waiting for something else. */
export function loadHttpClient(): typeof UndiciClient {
  if (!undiciClient) {
    const load = createRequire(import.meta.url);
    Object.assign((load('undici/lib/dispatcher/dispatcher.js') as { prototype: object }).prototype, load('undici/lib/api/index.js'));
    undiciClient = load('undici/lib/dispatcher/client.js') as typeof UndiciClient;
  }
  return undiciClient;
}
import { limits, type Limits } from './limits.js';
import type { Exchange } from './types.js';
import { t } from '../i18n/index.js';

/** An error opening a connection, with the kind of failure for code to test. */
export class ConnectError extends Error {
  constructor(
    message: string,
    readonly code: 'refused' | 'connect-timeout' | 'failed',
  ) {
    super(message);
  }
}

/** A request the grader sends. `key` undefined: no Idempotency-Key header; '' : the header sent empty. */
export interface PayRequest {
  key?: string;
  /** The body as an object (sent as JSON) or as raw text (sent as is). */
  body: unknown;
  /** Headers sent besides Content-Type and Idempotency-Key, by name as sent (e.g. `X-Forwarded-For`). */
  headers?: Record<string, string>;
  /**
   * 'second': sent as a second client, from SECOND_CLIENT_ADDRESS instead of 127.0.0.1
   * (openSecondConnection); the exchange's `client` says where it came from. Default: the
   * grader's usual connection.
   */
  client?: 'second';
}

/**
 * The client address of the grader's second client (PayRequest.client 'second'): any
 * 127.x.y.z is loopback on Linux, so the server sees a connection from another address
 * than 127.0.0.1 with no network beyond the machine. The sandbox's relay (relay.py,
 * relay.ts) uses the same address for the connections of its second socket.
 */
export const SECOND_CLIENT_ADDRESS = '127.3.4.5';

/** The relay socket of the second client beside a relay's socket (relay.py makes it where it can bind SECOND_CLIENT_ADDRESS). */
export function secondSocketPath(socketPath: string): string {
  return `${socketPath}.other`;
}

/** The body most checks send: a valid payment of 1000 for user u1. */
export const DEFAULT_PAYMENT = { user: 'u1', amount: 1000 } as const;

/** Time limits of one exchange, in ms. */
export interface Timeouts {
  /** Opening the TCP connection. */
  connectMs: number;
  /** From the request sent to the whole response received. */
  answerMs: number;
}

/**
 * Limits for requests to a server under test, in ms: generous against a 50 ms charge, bounded
 * all the same (see limits.ts). `run`: the run's limits, read once when it began (RunSettings,
 * GradeOptions.limits, LiveContext.limits); default: the environment's now.
 * @throws Error as limits() when `run` is not given and a limit variable is bad
 */
export function checkTimeouts(run: Limits = limits()): Timeouts {
  return { connectMs: 2000, answerMs: run.requestMs };
}

/**
 * checkTimeouts with twice the time to answer, in ms: for a round on a slow database, where
 * a correct server that lines its requests up behind a lock answers the last one after a
 * few slow statements per request before it. A server that hangs costs one limit more.
 */
export function slowDatabaseTimeouts(run: Limits = limits()): Timeouts {
  const { connectMs, answerMs } = checkTimeouts(run);
  return { connectMs, answerMs: 2 * answerMs };
}

/** A target: which server instance, on which port of 127.0.0.1. */
export interface Target {
  label: string;
  port: number;
  /** When set, the Unix socket that leads to that port (a sandboxed server's relay): connections go there. */
  socketPath?: string;
}

/** Whether `file` is a Unix socket, by lstat (a link to one is not). */
function isSocket(file: string): boolean {
  try {
    return fs.lstatSync(file).isSocket();
  } catch {
    return false;
  }
}

/**
 * Opens a connection to 127.0.0.1:port, or to the target's relay socket when it has one
 * (only when it is a socket, not a link: an absent or replaced socket is refused).
 * @throws ConnectError when it is refused or does not open within `timeoutMs` ms (message in the learner's language)
 */
export function openConnection(target: number | Pick<Target, 'port' | 'socketPath'>, timeoutMs: number): Promise<net.Socket> {
  const { port, socketPath } = typeof target === 'number' ? { port: target, socketPath: undefined } : target;
  return connectTo(port, socketPath, timeoutMs);
}

/** A failure to bind the local address of a connection (the second client's address), with its error code. */
class BindError extends Error {}

/**
 * Opens a connection as in openConnection, to the relay socket `socketPath` when given,
 * else to 127.0.0.1:port from `localAddress` (default: the kernel's choice, 127.0.0.1).
 * @throws BindError when `localAddress` cannot be bound; ConnectError as openConnection
 */
function connectTo(port: number, socketPath: string | undefined, timeoutMs: number, localAddress?: string): Promise<net.Socket> {
  // A relay socket lies in a folder the sandbox may write (when the grader is not root): it
  // must be a socket itself, never a link to another one of the host's.
  if (socketPath !== undefined && !isSocket(socketPath)) return Promise.reject(new ConnectError(t('http.refused', { port }), 'refused'));
  return new Promise((resolve, reject) => {
    const socket = socketPath ? net.connect({ path: socketPath }) : net.connect({ host: '127.0.0.1', port, ...(localAddress ? { localAddress } : {}) });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new ConnectError(t('http.connectTimeout', { port, ms: timeoutMs }), 'connect-timeout'));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (err.syscall === 'bind') return reject(new BindError(err.code ?? err.message));
      // A relay socket not yet made, or gone with its sandbox, is a refused connection too.
      const refused = err.code === 'ECONNREFUSED' || (socketPath !== undefined && err.code === 'ENOENT');
      reject(refused ? new ConnectError(t('http.refused', { port }), 'refused') : new ConnectError(t('http.failed', { error: err.code ?? err.message }), 'failed'));
    });
  });
}

/** Where a second client's connection came from (Exchange.client). */
export interface ClientAddress {
  /** The client address the server sees: SECOND_CLIENT_ADDRESS, or 127.0.0.1 when it could not be used. */
  address: string;
  /** Why SECOND_CLIENT_ADDRESS could not be used, in the learner's language; absent when it was. */
  fallback?: string;
  /**
   * True when the target is behind a relay whose second socket is not there. On Linux every
   * 127.x.y.z is loopback, so the relay (made before SOCKET) always binds it: a missing
   * SOCKET.other was most likely removed by the server beside it, which shares its folder.
   */
  relayMissing?: boolean;
}

/**
 * Opens a connection as a second client: from SECOND_CLIENT_ADDRESS, through the relay's
 * second socket (secondSocketPath) for a target behind a relay, else bound to that address
 * (localAddress). Where that cannot be done (the address cannot be bound here, or the relay
 * made no second socket) the connection is opened as usual, from 127.0.0.1, and `client`
 * says so and why.
 * @throws ConnectError as openConnection
 */
export async function openSecondConnection(target: Pick<Target, 'port' | 'socketPath'>, timeoutMs: number): Promise<{ socket: net.Socket; client: ClientAddress }> {
  const { port, socketPath } = target;
  if (socketPath !== undefined) {
    const second = secondSocketPath(socketPath);
    if (isSocket(second)) return { socket: await connectTo(port, second, timeoutMs), client: { address: SECOND_CLIENT_ADDRESS } };
    // No second socket: the relay could not bind the address in the sandbox (or predates it).
    return { socket: await connectTo(port, socketPath, timeoutMs), client: { address: '127.0.0.1', fallback: t('http.secondClient.noRelay', { address: SECOND_CLIENT_ADDRESS }), relayMissing: true } };
  }
  try {
    return { socket: await connectTo(port, undefined, timeoutMs, SECOND_CLIENT_ADDRESS), client: { address: SECOND_CLIENT_ADDRESS } };
  } catch (err) {
    if (!(err instanceof BindError)) throw err;
    return { socket: await connectTo(port, undefined, timeoutMs), client: { address: '127.0.0.1', fallback: t('http.secondClient.noBind', { address: SECOND_CLIENT_ADDRESS, error: err.message }) } };
  }
}

/** The most of a response body the grader reads, in bytes (64 KB); a longer body ends the exchange (Exchange.truncated). */
export const MAX_BODY_BYTES = 64 * 1024;

/**
 * Reads at most `max` bytes of a body and stops reading there (the stream is destroyed),
 * so no server can make the grader hold more.
 * @returns the text read (UTF-8) and whether the body went on beyond `max`
 */
async function readBounded(body: AsyncIterable<Buffer>, max: number): Promise<{ text: string; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    if (size + chunk.length > max) {
      chunks.push(chunk.subarray(0, max - size));
      return { text: Buffer.concat(chunks).toString('utf8'), truncated: true };
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return { text: Buffer.concat(chunks).toString('utf8'), truncated: false };
}

/** Raised by the guard timer of an exchange that outlived its time limit. */
class GuardTimeout extends Error {}

function bodyText(body: unknown): string {
  return typeof body === 'string' ? body : JSON.stringify(body);
}

let requestCount = 0;

/**
 * How many requests this process has sent to servers so far (POST /pay and GET alike, the
 * readiness polls of GET /health included): a figure for the benchmark (bench/bench.ts),
 * which gives a stdlib oracle the same amount of work.
 */
export function requestsSent(): number {
  return requestCount;
}

let inFlight = 0;

/**
 * How many requests of this process are on their way now (sent, not yet answered or
 * failed): lets a test act once a request is held by a server, instead of after a fixed
 * time that a loaded machine may not keep.
 */
export function requestsInFlight(): number {
  return inFlight;
}

/**
 * Sends one request over an already open socket with undici and records the exchange
 * (the chaos run opens its sockets itself, to name each one's fate by its local port).
 * Never throws: a timeout or a broken connection becomes `exchange.error`.
 */
export async function sendOn(
  socket: net.Socket,
  target: Target,
  method: 'GET' | 'POST',
  path: string,
  req: PayRequest | undefined,
  timeouts: Timeouts,
): Promise<Exchange> {
  requestCount++;
  inFlight++;
  const requestBody = req ? bodyText(req.body) : '';
  const exchange: Exchange = { server: target.label, port: target.port, method, path, requestBody, ms: 0 };
  if (req?.key !== undefined) exchange.key = req.key;
  const headers: Record<string, string> = {};
  if (method === 'POST') headers['content-type'] = 'application/json';
  if (req?.key !== undefined) headers['idempotency-key'] = req.key;
  if (req?.headers) {
    Object.assign(headers, Object.fromEntries(Object.entries(req.headers).map(([name, value]) => [name.toLowerCase(), value])));
    exchange.headers = { ...req.headers };
  }
  // The one socket is handed to undici once: should it ask again (the socket was closed
  // under a request), it gets an error, not the dead socket back, which would make it ask
  // again at once for ever and hold the event loop.
  let handed = false;
  const Client = loadHttpClient();
  const client = new Client(`http://127.0.0.1:${target.port}`, {
    // undici expects the connector to answer asynchronously, as a real connect does.
    connect: (_options, callback) =>
      process.nextTick(() => {
        if (handed) return callback(new Error('the connection was closed'), null);
        handed = true;
        callback(null, socket);
      }),
    headersTimeout: timeouts.answerMs,
    bodyTimeout: timeouts.answerMs,
  });
  const started = performance.now();
  // A last guard: whatever undici does, the exchange ends within answerMs plus a second.
  const guard = setTimeout(() => void client.destroy(new GuardTimeout()).catch(() => undefined), timeouts.answerMs + 1000);
  try {
    const res = await client.request({ method, path, headers, body: method === 'POST' ? requestBody : undefined });
    exchange.status = res.statusCode;
    // Idempotent-Replayed is Stripe's name for the same header: `replayed` is the first of
    // the two the server sent, `replayedAlias` Stripe's when it sent both.
    const headerText = (value: string | string[] | undefined) => (Array.isArray(value) ? value.join(', ') : value);
    const ours = headerText(res.headers['idempotency-replayed']);
    const stripe = headerText(res.headers['idempotent-replayed']);
    if (ours !== undefined || stripe !== undefined) exchange.replayed = ours ?? stripe;
    if (ours !== undefined && stripe !== undefined) exchange.replayedAlias = stripe;
    if (ours === undefined && stripe !== undefined) exchange.replayedName = 'Idempotent-Replayed';
    // Headers named like a replay header that is not one (a misspelling): shown, so a
    // verdict on a missing header can name what the server sent instead.
    const like = Object.entries(res.headers).filter(([name]) => /replay/i.test(name) && name !== 'idempotency-replayed' && name !== 'idempotent-replayed');
    if (like.length > 0) exchange.replayLike = like.map(([name, value]) => `${name}: ${headerText(value)}`).join('; ').slice(0, 200);
    const location = res.headers.location;
    if (location !== undefined) exchange.location = Array.isArray(location) ? location.join(', ') : location;
    const { text, truncated } = await readBounded(res.body, MAX_BODY_BYTES);
    exchange.responseBody = text;
    if (truncated) exchange.truncated = true;
  } catch (err) {
    if (err instanceof GuardTimeout) delete exchange.status;
    const code = (err as { code?: string }).code;
    const timedOut = code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || err instanceof GuardTimeout;
    exchange.errorCode = timedOut ? 'timeout' : 'failed';
    exchange.error = timedOut ? t('http.noAnswer', { ms: timeouts.answerMs }) : t('http.failed', { error: code ?? (err as Error).message });
  } finally {
    clearTimeout(guard);
    exchange.ms = Math.round(performance.now() - started);
    await client.destroy().catch(() => undefined);
    inFlight--;
  }
  return exchange;
}

/**
 * The exchange of a request whose connection could not be opened: what was to be sent (key,
 * headers, the second client's address), no answer, and the connection's error.
 */
function unconnected(target: Target, method: Exchange['method'], path: string, req: PayRequest | undefined, err: unknown): Exchange {
  const exchange: Exchange = { server: target.label, port: target.port, method, path, requestBody: req ? bodyText(req.body) : '', ms: 0, error: (err as Error).message, errorCode: err instanceof ConnectError ? err.code : 'failed' };
  if (req?.key !== undefined) exchange.key = req.key;
  if (req?.headers) exchange.headers = { ...req.headers };
  if (req?.client === 'second') exchange.client = { address: SECOND_CLIENT_ADDRESS };
  return exchange;
}

/**
 * Sends one request to a server and returns the exchange; never throws.
 * A refused or slow connection is reported in `exchange.error`.
 */
export async function send(
  target: Target,
  method: 'GET' | 'POST',
  path: string,
  req?: PayRequest,
  timeouts: Timeouts = checkTimeouts(),
): Promise<Exchange> {
  let socket: net.Socket;
  let client: ClientAddress | undefined;
  try {
    if (req?.client === 'second') ({ socket, client } = await openSecondConnection(target, timeouts.connectMs));
    else socket = await openConnection(target, timeouts.connectMs);
  } catch (err) {
    return unconnected(target, method, path, req, err);
  }
  const exchange = await sendOn(socket, target, method, path, req, timeouts);
  if (client) exchange.client = client;
  return exchange;
}

/**
 * Sends POST /pay requests all at once: every connection is opened first, then every
 * request is written in the same tick, so they reach the server together.
 * `requests[i]` goes to `targets[i % targets.length]`. Returns the exchanges in request order.
 */
export async function sendSimultaneously(
  targets: Target[],
  requests: PayRequest[],
  timeouts: Timeouts = checkTimeouts(),
  onWritten?: () => void,
): Promise<Exchange[]> {
  const opened = await Promise.allSettled(
    requests.map((req, i) =>
      req.client === 'second'
        ? openSecondConnection(targets[i % targets.length], timeouts.connectMs)
        : openConnection(targets[i % targets.length], timeouts.connectMs).then((socket) => ({ socket, client: undefined })),
    ),
  );
  if (onWritten) {
    // Told once every opened connection has written its request to the kernel (or ended): polled, as undici writes in a later turn.
    const sockets = opened.flatMap((o) => (o.status === 'fulfilled' ? [o.value.socket] : []));
    const until = performance.now() + timeouts.connectMs;
    const poll = () => {
      if (sockets.every((s) => s.bytesWritten > 0 || s.destroyed) || performance.now() > until) onWritten();
      else setTimeout(poll, 1).unref();
    };
    setTimeout(poll, 1).unref();
  }
  return Promise.all(
    requests.map((req, i) => {
      const target = targets[i % targets.length];
      const conn = opened[i];
      if (conn.status === 'fulfilled') {
        const { socket, client } = conn.value;
        return sendOn(socket, target, 'POST', '/pay', req, timeouts).then((exchange) => {
          if (client) exchange.client = client;
          return exchange;
        });
      }
      return Promise.resolve(unconnected(target, 'POST', '/pay', req, conn.reason));
    }),
  );
}

/** The response body parsed as JSON, or undefined when it is not JSON. */
export function responseJson(exchange: Exchange): unknown {
  if (exchange.responseBody === undefined) return undefined;
  try {
    return JSON.parse(exchange.responseBody);
  } catch {
    return undefined;
  }
}
