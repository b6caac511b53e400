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
import { limits } from './limits.js';
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

/** Limits for requests to a server under test: generous against a 50 ms charge, bounded all the same (see limits.ts). */
export function checkTimeouts(): Timeouts {
  return { connectMs: 2000, answerMs: limits().requestMs };
}

/**
 * checkTimeouts with twice the time to answer, in ms: for a round on a slow database, where
 * a correct server that lines its requests up behind a lock answers the last one after a
 * few slow statements per request before it. A server that hangs costs one limit more.
 */
export function slowDatabaseTimeouts(): Timeouts {
  const { connectMs, answerMs } = checkTimeouts();
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
  // A relay socket lies in a folder the sandbox may write (when the grader is not root): it
  // must be a socket itself, never a link to another one of the host's.
  if (socketPath !== undefined && !isSocket(socketPath)) return Promise.reject(new ConnectError(t('http.refused', { port }), 'refused'));
  return new Promise((resolve, reject) => {
    const socket = socketPath ? net.connect({ path: socketPath }) : net.connect({ host: '127.0.0.1', port });
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
      // A relay socket not yet made, or gone with its sandbox, is a refused connection too.
      const refused = err.code === 'ECONNREFUSED' || (socketPath !== undefined && err.code === 'ENOENT');
      reject(refused ? new ConnectError(t('http.refused', { port }), 'refused') : new ConnectError(t('http.failed', { error: err.code ?? err.message }), 'failed'));
    });
  });
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
  try {
    socket = await openConnection(target, timeouts.connectMs);
  } catch (err) {
    const exchange: Exchange = { server: target.label, port: target.port, method, path, requestBody: req ? bodyText(req.body) : '', ms: 0, error: (err as Error).message, errorCode: err instanceof ConnectError ? err.code : 'failed' };
    if (req?.key !== undefined) exchange.key = req.key;
    return exchange;
  }
  return sendOn(socket, target, method, path, req, timeouts);
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
    requests.map((_, i) => openConnection(targets[i % targets.length], timeouts.connectMs)),
  );
  if (onWritten) {
    // Told once every opened connection has written its request to the kernel (or ended): polled, as undici writes in a later turn.
    const sockets = opened.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
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
      if (conn.status === 'fulfilled') return sendOn(conn.value, target, 'POST', '/pay', req, timeouts);
      const exchange: Exchange = { server: target.label, port: target.port, method: 'POST', path: '/pay', requestBody: bodyText(req.body), ms: 0, error: (conn.reason as Error).message, errorCode: conn.reason instanceof ConnectError ? conn.reason.code : 'failed' };
      if (req.key !== undefined) exchange.key = req.key;
      return Promise.resolve(exchange);
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
