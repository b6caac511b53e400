/**
 * The provider's gate (server contract, "The provider's gate"): a Unix socket the grader
 * owns, named to the server in IDEM_PROVIDER_GATE. Each call of the provider (charge())
 * connects to it and reports itself twice, each time waiting for the grader's word:
 *
 *   server → `{"point": "start", "user", "amount", "key"?, "pid"}\n`   (before any money moves)
 *   grader → `go\n`
 *   server → `{"point": "moved"}\n`   (the money moved: the statement holds the charge)
 *   grader → `go\n`                    (then charge() returns to the server)
 *
 * Unless a check holds a charge, the grader answers at once. Held, the charge waits until
 * the check releases it, or the check kills the server there: a crash at a point the
 * grader chooses (before the money moved, after it moved). So a check asks causal
 * questions ("is another payment answered while this charge is held?") instead of timing
 * a slow provider on a machine whose load it does not know.
 *
 * The socket lives in a folder of the grader's own (made with mkdtemp, mode 0711, under
 * the grader's temporary folder), outside every folder a sandboxed server may write, and
 * is bound into the sandbox read-only: the server can connect to it, never replace it.
 * The socket is mode 0666 so that a sandbox run as another uid can connect.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/** Where in a charge the gate stops it: before the money moves, or once it has moved (before charge() returns). */
export type GatePoint = 'start' | 'moved';

/** One call of the provider as the gate saw it. */
export interface GateCharge {
  user: string;
  amount: number;
  /** The provider's idempotency key charge() was given, when one was. */
  key?: string;
  /** The pid the server reported (in its own pid namespace). */
  pid?: number;
  /** When it reported its start, performance.now() ms. */
  startedAt: number;
  /** When it reported the money moved, performance.now() ms; undefined until then. */
  movedAt?: number;
  /** Where it is waiting for the grader's word now; undefined when it is not waiting. */
  waitingAt?: GatePoint;
  /** True once the connection closed (charge() returned, failed or its process died). */
  closed: boolean;
}

/**
 * One database statement a server reported at the gate (IDEM_DB_GATE): run outside a
 * transaction, or ending one (`ends`), it waits for the grader's word before it runs
 * (server contract, "The database's gate").
 */
export interface GateStatement {
  /** The statement's text, its first 200 characters. */
  sql: string;
  /** The pid and the thread (native id) that run it, as the server reported them (in its own pid namespace). */
  pid?: number;
  thread?: number;
  /** When it was reported, performance.now() ms. */
  reportedAt: number;
  /**
   * True for a statement that ends a transaction (COMMIT, END, a driver's commit()), which a
   * server may report beside those outside a transaction (`"ends": true`): held only by a
   * hold that asks for them (holdStatements' `ends`), else let run at once, told `late`.
   */
  ends?: boolean;
  /** True once the grader let it run. */
  released: boolean;
  /** True once the server reported it ran (or its connection closed). */
  ran: boolean;
}

/**
 * A check's hold on the database statements of a gate (holdStatements): every statement
 * reported from now on waits until a wave lets it run (grader/lockstep.ts decides when).
 */
export interface StatementHold {
  /** The statements waiting now, in the order they came. */
  waiting(): GateStatement[];
  /** Lets every statement waiting now run, at once (given `which`, only those it accepts; the others keep waiting); returns how many. */
  releaseWave(which?: (st: GateStatement) => boolean): number;
  /** Lets every waiting statement run and, until release(), lets every later one run at once, told `go` (the grader's order stands in for IDEM_DB_MS: none is waited). */
  passThrough(): void;
  /** Lets every waiting statement run and holds no more. Idempotent. */
  release(): void;
}

/**
 * One decision the grader made at a gate, as the gate's `decisions` log keeps it, so that a
 * seed's run can be compared with another run of the same seed (test/seed-replay.test.ts)
 * and a failure can say what the grader held:
 * - `let-go`: a hold on charges was released; `charges` are the charges it held then
 *   (`user amount` and the provider's key when given, sorted: charges that reach the gate
 *   together come in any order), `point` where they waited;
 * - `wave`: statements let run together (a lockstep's wave, or a check's chosen few);
 *   `statements` are their texts (the first 200 characters), sorted;
 * - `pass`: a statement hold stopped holding (released, or passing every later statement
 *   through); `statements` are the texts of those still waiting then, sorted.
 * Nothing timed is kept: when a decision came is the order of the log, not a clock.
 */
export type GateDecision =
  | { kind: 'let-go'; point: GatePoint; charges: string[] }
  | { kind: 'wave'; statements: string[] }
  | { kind: 'pass'; statements: string[] };

/** How many decisions a gate's log keeps at most (later ones are dropped). */
const MAX_DECISIONS = 10_000;

/** A charge as a gate decision names it: `user amount`, and ` key K` when charge() was given the provider's key. */
export function chargeName(c: Pick<GateCharge, 'user' | 'amount' | 'key'>): string {
  return `${JSON.stringify(c.user)} ${c.amount}${c.key === undefined ? '' : ` key ${JSON.stringify(c.key)}`}`;
}

/** A check's hold on the charges that match it, at one point, until released. */
export interface Hold {
  /** The charges held (waiting at the hold's point), in the order they came. */
  readonly held: GateCharge[];
  /** Lets every held charge go on, and stops holding new ones. Idempotent. */
  release(): void;
}

interface Waiting {
  charge: GateCharge;
  socket: net.Socket;
}

interface HoldState extends Hold {
  point: GatePoint;
  match: (c: GateCharge) => boolean;
  released: boolean;
}

/** The most a report line may be, in bytes: a user is at most 100 characters, a key 255. */
const MAX_LINE_BYTES = 4096;

/** How many statements one connection may report (a thread's lifetime of statements), and how many a gate keeps. */
const MAX_STATEMENTS_PER_CONNECTION = 100_000;
const MAX_STATEMENTS = 10_000;

/** How many connections a gate takes at most: a server that floods it is cut off. */
const MAX_CONNECTIONS = 512;

/**
 * One server instance's gate: the socket, the charges it reported and the holds a check
 * keeps. Made by openGate; closed by close().
 */
export class ProviderGate {
  /** The socket's path (IDEM_PROVIDER_GATE). */
  readonly socketPath: string;
  /** Every charge reported, in the order their starts came. */
  readonly charges: GateCharge[] = [];
  private readonly server: net.Server;
  private readonly holds: HoldState[] = [];
  private readonly waiting = new Map<GateCharge, Waiting>();
  private readonly listeners = new Set<() => void>();
  /** The until() waits not yet ended, each ended with false by close(). */
  private readonly pendingUntils = new Set<(value: boolean) => void>();
  private closed = false;
  /** Every database statement reported (IDEM_DB_GATE), in the order they came. */
  readonly statements: GateStatement[] = [];
  private readonly statementSockets = new Map<GateStatement, net.Socket>();
  private statementHold: { active: boolean; pass: boolean; ends: boolean; waiting: GateStatement[] } | undefined;
  /** What the grader decided at this gate, in order (see GateDecision); at most MAX_DECISIONS. */
  readonly decisions: GateDecision[] = [];

  constructor(socketPath: string, server: net.Server) {
    this.socketPath = socketPath;
    this.server = server;
    server.on('connection', (socket) => this.accept(socket));
  }

  /**
   * Holds every charge that matches `match` (default: every one) when it reaches `point`
   * (default `start`, before the money moves), from now until the hold is released. A
   * charge already waiting there is held too.
   */
  hold(match: (c: GateCharge) => boolean = () => true, point: GatePoint = 'start'): Hold {
    const state: HoldState = {
      point,
      match,
      released: false,
      held: [],
      release: () => {
        if (state.released) return;
        state.released = true;
        if (state.held.length > 0) this.decided({ kind: 'let-go', point, charges: state.held.map(chargeName).sort() });
        for (const c of state.held) this.decide(c);
      },
    };
    this.holds.push(state);
    return state;
  }

  /**
   * Holds every database statement reported from now on (IDEM_DB_GATE) until a wave lets it
   * go (StatementHold.releaseWave) or the hold is released. One hold at a time: a second
   * call replaces the first, which is released. A statement that ends a transaction
   * (GateStatement.ends) is held only when `options.ends` is true (step 12 holds a COMMIT to
   * crash a server between its answer and its COMMIT); otherwise it runs at once.
   */
  holdStatements(options: { ends?: boolean } = {}): StatementHold {
    const before = this.statementHold;
    if (before && before.waiting.length > 0) this.decided({ kind: 'pass', statements: before.waiting.map((st) => st.sql).sort() });
    before?.waiting.splice(0).forEach((st) => this.letRun(st));
    const state = { active: true, pass: false, ends: options.ends === true, waiting: [] as GateStatement[] };
    this.statementHold = state;
    const letAllRun = () => {
      if (state.waiting.length > 0) this.decided({ kind: 'pass', statements: state.waiting.map((st) => st.sql).sort() });
      for (const st of state.waiting.splice(0)) this.letRun(st);
    };
    return {
      waiting: () => [...state.waiting],
      releaseWave: (which?: (st: GateStatement) => boolean) => {
        const wave = which ? state.waiting.filter(which) : state.waiting.slice();
        state.waiting = state.waiting.filter((st) => !wave.includes(st));
        if (wave.length > 0) this.decided({ kind: 'wave', statements: wave.map((st) => st.sql).sort() });
        for (const st of wave) this.letRun(st);
        return wave.length;
      },
      passThrough: () => {
        state.pass = true;
        letAllRun();
      },
      release: () => {
        state.active = false;
        letAllRun();
      },
    };
  }

  /** Keeps a decision in the log (see GateDecision), while it holds fewer than MAX_DECISIONS. */
  private decided(decision: GateDecision): void {
    if (this.decisions.length < MAX_DECISIONS) this.decisions.push(decision);
  }

  /** Calls `listener` on every report the gate gets (a charge, a statement, a closed connection) until the returned function is called. */
  onReport(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Lets a statement run: `go` when a hold had it (the grader chose when), `late` when none did (the server then waits IDEM_DB_MS, as without the gate). */
  private letRun(st: GateStatement, held = true): void {
    st.released = true;
    const socket = this.statementSockets.get(st);
    if (socket && !socket.destroyed) socket.write(held ? 'go\n' : 'late\n');
  }

  /**
   * Waits until `seen` holds for the gate's charges (checked at once and on every report),
   * at most `timeoutMs` ms, or until the gate is closed.
   * @returns true when it came to hold, false when the time ran out or the gate was closed first
   */
  until(seen: (charges: GateCharge[]) => boolean, timeoutMs: number): Promise<boolean> {
    if (seen(this.charges)) return Promise.resolve(true);
    if (this.closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const check = () => {
        if (!seen(this.charges)) return;
        done(true);
      };
      const timer = setTimeout(() => done(false), timeoutMs);
      const done = (value: boolean) => {
        clearTimeout(timer);
        this.listeners.delete(check);
        this.pendingUntils.delete(done);
        resolve(value);
      };
      this.listeners.add(check);
      this.pendingUntils.add(done);
    });
  }

  /** The charges reported for a payment body. */
  chargesOf(body: { user: string; amount: number }): GateCharge[] {
    return this.charges.filter((c) => c.user === body.user && c.amount === body.amount);
  }

  /** Lets every waiting charge go on and holds nothing more; closes the socket and removes its folder. Never throws. */
  close(): void {
    this.closed = true;
    // A wait on a closed gate ends now, its timer with it (it would keep the process alive to its bound).
    for (const done of [...this.pendingUntils]) done(false);
    for (const h of this.holds) h.released = true;
    for (const { socket } of this.waiting.values()) socket.destroy();
    this.waiting.clear();
    if (this.statementHold) this.statementHold.active = false;
    for (const socket of this.statementSockets.values()) socket.destroy();
    this.statementSockets.clear();
    this.server.close();
    try {
      fs.rmSync(path.dirname(this.socketPath), { recursive: true, force: true });
    } catch {
      // already gone
    }
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }

  /** Answers `go` to a charge waiting at its point unless an active hold takes it. */
  private decide(charge: GateCharge): void {
    const waiting = this.waiting.get(charge);
    if (!waiting || charge.waitingAt === undefined) return;
    const hold = this.holds.find((h) => !h.released && h.point === charge.waitingAt && h.match(charge));
    if (hold) {
      if (!hold.held.includes(charge)) hold.held.push(charge);
      return;
    }
    charge.waitingAt = undefined;
    this.waiting.delete(charge);
    if (!waiting.socket.destroyed) waiting.socket.write('go\n');
  }

  private accept(socket: net.Socket): void {
    let buffered = '';
    let charge: GateCharge | undefined;
    let statement: GateStatement | undefined;
    let statements = 0;
    socket.setEncoding('utf8');
    socket.on('error', () => undefined);
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      if (buffered.length > MAX_LINE_BYTES) {
        socket.destroy();
        return;
      }
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        let report: Record<string, unknown>;
        try {
          report = JSON.parse(line) as Record<string, unknown>;
        } catch {
          socket.destroy();
          return;
        }
        if (report === null || typeof report !== 'object') {
          socket.destroy();
          return;
        }
        if (charge === undefined && report.point === 'sql' && typeof report.sql === 'string' && (statement === undefined || statement.ran)) {
          // A database statement (IDEM_DB_GATE): held while a check holds statements, else let run at once.
          if (++statements > MAX_STATEMENTS_PER_CONNECTION) {
            socket.destroy();
            return;
          }
          statement = {
            sql: report.sql.slice(0, 200),
            ...(typeof report.pid === 'number' ? { pid: report.pid } : {}),
            ...(typeof report.thread === 'number' ? { thread: report.thread } : {}),
            reportedAt: performance.now(),
            released: false,
            ran: false,
            ...(report.ends === true ? { ends: true } : {}),
          };
          if (this.statements.length < MAX_STATEMENTS) this.statements.push(statement);
          this.statementSockets.set(statement, socket);
          const hold = this.statementHold;
          if (hold?.active && !hold.pass && (!statement.ends || hold.ends)) hold.waiting.push(statement);
          // A transaction's end not held is told `late`: the server answers as it would without the gate.
          else this.letRun(statement, hold?.active === true && !statement.ends);
          this.notify();
          continue;
        }
        if (charge === undefined && statement !== undefined && report.point === 'ran' && statement.released && !statement.ran) {
          statement.ran = true;
          this.statementSockets.delete(statement);
          this.notify();
          continue;
        }
        if (charge === undefined && statement === undefined && report.point === 'start' && typeof report.user === 'string' && typeof report.amount === 'number') {
          charge = {
            user: report.user,
            amount: report.amount,
            ...(typeof report.key === 'string' ? { key: report.key } : {}),
            ...(typeof report.pid === 'number' ? { pid: report.pid } : {}),
            startedAt: performance.now(),
            waitingAt: 'start',
            closed: false,
          };
          this.charges.push(charge);
          this.waiting.set(charge, { charge, socket });
        } else if (charge !== undefined && report.point === 'moved' && charge.movedAt === undefined && charge.waitingAt === undefined) {
          charge.movedAt = performance.now();
          charge.waitingAt = 'moved';
          this.waiting.set(charge, { charge, socket });
        } else {
          socket.destroy();
          return;
        }
        this.decide(charge);
        this.notify();
      }
    });
    socket.on('close', () => {
      if (statement && !statement.ran) {
        statement.ran = true;
        this.statementSockets.delete(statement);
        if (this.statementHold) this.statementHold.waiting = this.statementHold.waiting.filter((st) => st !== statement);
        this.notify();
      }
      if (charge) {
        charge.closed = true;
        this.waiting.delete(charge);
        this.notify();
      }
    });
  }
}

/**
 * Opens a gate: a new folder of the grader's own under the system's temporary folder (/tmp when that one's path is too long for a socket)
 * (mkdtemp, then mode 0711 and checked to be a real folder owned by this process's uid,
 * never followed through a link) holding the socket `provider.sock`, mode 0600: only the
 * server's own user can connect to it. As root the server runs as the check's own user
 * (sandbox.ts sandboxOwner), given as `owner`: the socket is that user's; otherwise the
 * server runs as the grader's uid, which owns it. No other local user can hold a charge
 * open or report one.
 * @param owner the uid and gid the check's servers run as, when not the grader's own
 * @returns the gate, listening
 * @throws Error when the folder or the socket cannot be made
 */
export async function openGate(owner?: { uid: number; gid: number }): Promise<ProviderGate> {
  // A socket's path holds at most 107 bytes (sun_path): under a long TMPDIR, /tmp is used.
  const base = Buffer.byteLength(path.join(os.tmpdir(), 'idem-gate-XXXXXX', 'provider.sock')) < 100 ? os.tmpdir() : '/tmp';
  const dir = fs.mkdtempSync(path.join(base, 'idem-gate-'));
  const stat = fs.lstatSync(dir);
  if (!stat.isDirectory() || (process.getuid && stat.uid !== process.getuid())) throw new Error(`openGate: ${dir} is not a folder of the grader's own`);
  fs.chmodSync(dir, 0o711);
  const socketPath = path.join(dir, 'provider.sock');
  const server = net.createServer();
  server.maxConnections = MAX_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.unref();
  fs.chmodSync(socketPath, 0o600);
  if (owner) fs.lchownSync(socketPath, owner.uid, owner.gid);
  return new ProviderGate(socketPath, server);
}

/**
 * The grader's own event-loop lag, measured while a check waits on a bound: when a bound
 * ran out while the grader itself was starved, the result is unclear, not the server's
 * failure. Started by startLagMonitor; `worstMs` is the largest delay seen, in ms.
 */
export interface LagMonitor {
  /** The largest event-loop delay seen since the start, in ms. */
  worstMs(): number;
  /** Stops measuring. Idempotent. */
  stop(): void;
}

/** Starts measuring the event loop's delay (perf_hooks monitorEventLoopDelay, 20 ms resolution). */
export function startLagMonitor(): LagMonitor {
  const histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: 20 });
  histogram.enable();
  return {
    worstMs: () => histogram.max / 1e6,
    stop: () => histogram.disable(),
  };
}

/** The event-loop lag above which a bound that ran out says nothing about the server, in ms. */
export const STARVED_LAG_MS = 1000;

/**
 * Thrown when a check cannot tell: a bound ran out while the grader's own event loop lagged
 * STARVED_LAG_MS or more, after the check's bounded retries. The step's verdict is an error
 * ("inconclusive: the machine was too busy"), exit 2, never the learner's failure.
 */
export class Inconclusive extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'Inconclusive';
  }
}

/**
 * An Inconclusive raised when a start or request bound ran out while the server was kept
 * off a CPU or the grader's own event loop lagged (sched.ts starvedFor), after the bound's
 * own retries. The engine grades such a step again, a bounded number of times (engine.ts
 * STARVED_STEP_TRIES), with the same seed, before reporting it inconclusive (exit 2).
 */
export class Starved extends Inconclusive {
  constructor(message: string) {
    super(message);
    this.name = 'Starved';
  }
}
