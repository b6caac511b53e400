import crypto from 'node:crypto';
import fs from 'node:fs';
import { t } from '../i18n/index.js';
import path from 'node:path';
import { openStudentDatabase } from './student-db.js';
import { CheckFailed } from './failure.js';
import { readLedger } from './ledger.js';
import { send, sendSimultaneously, type PayRequest, type Timeouts } from './http.js';
import { TestData, serverTimeZone, type Seed } from './seed.js';
import { readStatement, type Charge } from './statement.js';
import { startServer, type ServerCommand, type ServerInstance } from './server.js';
import { removeUnsafe, renewFile } from './safe-copy.js';
import { sandboxOwner } from './sandbox.js';
import { copyImage, fillPod, imageBinds, interpreterHome, type Image, NOT_COPIED } from './workspace-image.js';
import { DEFAULT_DISK_BOUND, watchDisk, type DiskUse } from './disk-bound.js';
import { openGate, type GateDecision, type ProviderGate } from './gate.js';
import { lockstep, type Lockstep } from './lockstep.js';
import { SchedWatch, StarveMeter, starvedFor, type Starvation } from './sched.js';
import { checkTimeouts, slowDatabaseTimeouts } from './http.js';
import { limits, type Limits } from './limits.js';
import type { Exchange, KeylessGrouping, LedgerRow } from './types.js';
import { labelledOutput } from './printed.js';
import { readWritten, type WrittenLimits, type WrittenRead } from './written-files.js';

export type { Charge } from './statement.js';

/** How one more server instance of a check is started. */
export interface InstanceOptions {
  /**
   * Run it from a copy of the workspace of its own, as a second pod would: it shares only
   * IDEM_DB (and the provider) with the others. Default: the check's first copy.
   */
  ownCopy?: boolean;
  /** IDEM_CHARGE_MS for this instance, in ms: a slow provider. Default: the run's. */
  chargeMs?: number;
  /** IDEM_DB_MS for this instance, in ms: a slow database round trip. Default 0. */
  dbMs?: number;
  /** Its database statements reported at its gate (IDEM_DB_GATE), for a lockstep (lockstep.ts); a server that speaks it then skips IDEM_DB_MS. `'ends'`: the statements that end a transaction too (IDEM_DB_GATE=ends). Default false. */
  dbGate?: boolean | 'ends';
  /**
   * Run it on a database (and a provider's statement) of its own, from a copy of the
   * workspace of its own: a server nothing else of the check shares anything with, so
   * that its round is timed and judged alone. Default: the check's database.
   */
  ownDatabase?: boolean;
  /**
   * Its label in transcripts instead of the next letter in start order (A, B, C ...), so
   * that instances started beside the others keep the others' letters: one no other
   * instance of the check has, e.g. 'D'.
   */
  label?: string;
  /**
   * Run it on this database (from newDatabase), from a copy of the workspace of its own:
   * several instances given one are pods that share a database nothing else of the check
   * uses. Default: the check's database.
   */
  database?: CheckDatabase;
  /** Its place in the queue of starts: how long, in ms, what waits for it takes once it is up (see StartOptions.priority). Default 0. */
  priority?: number;
  /** Variables of the track's own contract for this instance, e.g. `{ IDEM_TTL_S: '1' }` (see StartOptions.env). Default none. */
  env?: Readonly<Record<string, string>>;
  /**
   * Its wall clock reads this many seconds ahead of the grader's, e.g. 90000: a server a
   * day and an hour later (StartOptions.clockOffsetS, fake-clock.ts). Only where
   * fakeClockLibrary() finds libfaketime; a server that reads the clock without the C
   * library keeps its real one, so the check must see the clock moved (a time the server
   * wrote) before it judges by it. Default: its real clock.
   */
  clockOffsetS?: number;
}

/** One database of a check: its sqlite file (IDEM_DB) and its provider's statement (IDEM_PROVIDER_LOG), absolute paths. */
export interface CheckDatabase {
  dbPath: string;
  providerLog: string;
}

/**
 * What a live check works with: server instances on free ports, each running in a working
 * folder of its own in a temporary folder and sharing one fresh sqlite file there (never
 * the learner's lab.db), an HTTP client that keeps every exchange for the transcript, the
 * ledger read from that file, and seeded test data (keys, users, amounts).
 *
 * The learner's workspace is copied once per check (workspace-image.ts: bounded, read-only,
 * never following a link); every working folder shows that one copy read-only (in a
 * sandbox each top entry is bound read-only over a placeholder; without one its files are
 * hard-linked, read-only by their mode), beside which the server may write new files, as
 * in a pod's container layer. What the servers write, together, is watched and bounded
 * (disk-bound.ts): past the bound the check's servers are stopped and it fails.
 */
export class LiveContext {
  /** The learner's workspace, the servers' working directory. */
  readonly workspace: string;
  /** The sqlite file every instance of this check uses (IDEM_DB). */
  readonly dbPath: string;
  /** Where the servers' charge() writes the payment provider's statement (IDEM_PROVIDER_LOG). */
  readonly providerLog: string;
  /** Every exchange of this check, in order. */
  readonly exchanges: Exchange[] = [];
  /** Advice that does not fail the step. */
  readonly warnings: string[] = [];
  /**
   * How the audit after the check (audit.ts) groups requests sent without a key into
   * payments: `each` keyless 201 its own (the default, strict for a track that requires
   * keys), or `same-answer` for a check whose servers deduplicate keyless requests by body
   * (see KeylessGrouping). Set it in the check before it ends.
   */
  keylessGrouping: KeylessGrouping = 'each';
  private readonly servers: ServerInstance[] = [];
  /** The database each instance runs on, by instance. */
  private readonly databaseOf = new Map<ServerInstance, CheckDatabase>();
  /** Labels handed out so far; counted at the call, so instances started together get distinct ones. */
  private labelsGiven = 0;
  /** Every label given so far, in start order (an instance not yet up included). */
  private readonly labels: string[] = [];
  /** Every instance started, starting or failed to start: the copy of the workspace it runs in, its database, and the instance once up. */
  private readonly pods: Array<{ folder: string; database: CheckDatabase; instance?: ServerInstance; failed?: boolean }> = [];
  private readonly command: ServerCommand | undefined;
  private readonly tmpDir: string;
  private copies = 0;
  /** Where the working folders go: the first is known from the start, since it holds the database. */
  private readonly copyPaths: string[] = [];
  private stoppedFor: string | undefined;
  /** The one read-only copy of the workspace every server of this check runs from; made at the first start. */
  private image: Image | undefined;
  /** Stops the watcher of what the servers write, while one runs. */
  private stopWatch: (() => void) | undefined;
  /**
   * Why the check was cut short by the grader's bounds, as the failure it ends with: the
   * servers wrote more than the disk bound (disk-bound.ts). Undefined while within them.
   */
  overrun: CheckFailed | undefined;
  /** Each instance's provider gate (gate.ts), and every gate opened, closed by stopAll. */
  private readonly gates = new Map<ServerInstance, ProviderGate>();
  /**
   * Payment bodies (`user`, NUL, `amount`) the final audit (audit.ts) leaves out: the
   * requests sent with them, and the charges and ledger rows of their user and amount. A
   * part of the check the grader gave up on without a verdict (a try it could not judge,
   * the machine too busy) leaves requests of its own in flight or unanswered: they are the
   * grader's, judged by nothing (see leaveOut).
   */
  private readonly leftOut = new Set<string>();
  /** The keys of the ledger rows the check wrote itself (seedLedgerRow): the final audit (audit.ts) takes them for no payment of the server's. */
  readonly seededKeys = new Set<string>();
  private readonly openGates: ProviderGate[] = [];
  /** This check's keys, users and amounts, from the run's seed. */
  readonly data: TestData;
  /** The run's time limits (ms), read once when the run began: a server's start, a request's answer. */
  readonly limits: Limits;

  /**
   * @param workspace the learner's workspace (absolute); @param tmpDir an empty temporary
   *   folder of this check's, removed by the caller; @param stepId the step, which scopes
   *   the seeded data; @param seed the run's seed; @param runLimits the run's time limits
   *   (default: the environment's, read now)
   * @throws Error as limits() when `runLimits` is not given and a limit variable is bad
   */
  constructor(workspace: string, tmpDir: string, stepId: string, command: ServerCommand | undefined, seed: Seed, runLimits: Limits = limits()) {
    this.workspace = workspace;
    this.limits = runLimits;
    this.tmpDir = tmpDir;
    const first = this.copyPath();
    this.dbPath = path.join(first, 'lab.db');
    this.providerLog = path.join(first, 'provider.log');
    this.command = command;
    this.data = new TestData(seed, stepId);
  }

  /**
   * A folder for one more copy: `TMP/<random>/<the workspace's own name>`, so that the
   * server's working folder looks like a learner's, not like a grader's.
   */
  private copyPath(): string {
    const dest = path.join(this.tmpDir, crypto.randomBytes(4).toString('hex'), path.basename(this.workspace));
    this.copyPaths.push(dest);
    return dest;
  }

  /**
   * The check's one read-only copy of the learner's workspace (workspace-image.ts), made at
   * the first call, in a folder of its own beside the working folders.
   * @throws WorkspaceTooLarge when the workspace is over a bound of DEFAULT_IMAGE_LIMITS (a setup error naming the file)
   */
  private ensureImage(): Image {
    if (!this.image) {
      const parent = path.join(this.tmpDir, crypto.randomBytes(4).toString('hex'));
      fs.mkdirSync(parent, { mode: 0o755 });
      this.image = copyImage(this.workspace, path.join(parent, path.basename(this.workspace)), this.tmpDir);
    }
    return this.image;
  }

  /** Whether the servers of this check run in a sandbox (then the image is bound into their folders, not linked). */
  private get sandboxed(): boolean {
    return this.command?.sandbox !== undefined;
  }

  /**
   * A new working folder for a server (TMP/<random>/<the workspace's own name>), showing
   * the image of the learner's workspace (see fillPod): no byte of it is copied again.
   * @returns its absolute path
   * @throws WorkspaceTooLarge (see ensureImage)
   */
  private copyWorkspace(): string {
    const dest = this.copyPaths[this.copies++] ?? this.copyPath();
    this.copyInto(dest);
    return dest;
  }

  /** Fills the working folder `dest` (made when missing) from the image (see copyWorkspace). */
  private copyInto(dest: string): void {
    const image = this.ensureImage();
    fs.mkdirSync(dest, { recursive: true });
    fillPod(image, dest, this.sandboxed);
  }

  /**
   * Puts the check's folder back as it was before any server ran, but for the databases:
   * everything the servers wrote is removed (their HOME, files beside IDEM_DB, anything
   * in their working folders or around them) except each database (IDEM_DB, its log taken
   * in first) and its provider's statement, and every working folder is filled again
   * from the image (which no server could write: nothing is copied again), so a file a
   * server changed or removed is the learner's again. As pods
   * restarted from their image keep only their volume: a server that keeps its
   * idempotency records anywhere but IDEM_DB has lost them. Instances still running (or
   * starting) on another database are pods of another deployment: their copies, their
   * database and its folder are left as they are.
   * @throws Error when an instance on the check's own database is still running (stop them first)
   */
  renewCopies(): void {
    const running = this.pods.filter((p) => !p.failed && !(p.instance?.hasExited ?? false));
    if (running.some((p) => p.database.dbPath === this.dbPath)) throw new Error("renewCopies: stop every instance on the check's database first");
    const busy = new Set(running.map((p) => p.database.dbPath));
    // A running pod's folder (its copy, HOME, /tmp and socket) and its database's folder.
    const guarded = running.flatMap((p) => [path.dirname(p.folder), path.dirname(p.database.dbPath), path.dirname(p.database.providerLog)]);
    // The image of the workspace, which every working folder shows, is the grader's: kept.
    if (this.image) guarded.push(path.dirname(this.image.dir));
    const isGuarded = (full: string) => guarded.some((g) => full === g || full.startsWith(g + path.sep));
    const kept = new Set<string>();
    for (const db of [this.mainDatabase, ...this.databaseOf.values()]) {
      if (busy.has(db.dbPath)) continue;
      // Opened and closed once by the grader, a database takes in its write-ahead log and
      // rolls back a journal left by a killed server; its -wal, -shm and -journal files
      // are then not needed, and a file of the server's own under one of those names is
      // not kept either.
      // A link (or FIFO) a server left as the database or beside it is removed, unopened:
      // sqlite opens its -wal, -shm and -journal by name, wherever they point.
      removeUnsafe([db.dbPath, `${db.dbPath}-wal`, `${db.dbPath}-shm`, `${db.dbPath}-journal`, db.providerLog]);
      if (fs.existsSync(db.dbPath) && !kept.has(db.dbPath)) {
        try {
          const conn = openStudentDatabase(db.dbPath);
          conn.pragma('wal_checkpoint(TRUNCATE)');
          conn.close();
        } catch {
          // not a database the grader can open: the restarted server finds what it left
        }
      }
      kept.add(db.dbPath);
      kept.add(db.providerLog);
    }
    // The kept files' bytes go onto new files: what a server hung on the old ones (extended
    // attributes, say) is not the database's contents, and a restarted pod would not see it.
    // Opened without following links, copied onto a file made O_EXCL with mode 0600 under
    // a random name, renamed over the old one (safe-copy.ts): a link named like the copy,
    // or the file itself swapped for a link, never makes the grader read or write elsewhere.
    for (const file of kept) renewFile(file, sandboxOwner(this.command?.sandbox, this.workspace));
    const holds = (dir: string) => [...kept, ...guarded].some((file) => file.startsWith(dir + path.sep));
    const prune = (dir: string) => {
      for (const entry of fs.readdirSync(dir)) {
        const full = path.join(dir, entry);
        if (kept.has(full) || isGuarded(full)) continue;
        if (holds(full) && fs.lstatSync(full).isDirectory()) prune(full);
        else fs.rmSync(full, { recursive: true, force: true });
      }
    };
    prune(this.tmpDir);
    for (const dest of this.copyPaths.slice(0, this.copies)) if (!isGuarded(dest)) this.copyInto(dest);
  }

  /**
   * Starts one more instance of the learner's server on this check's database.
   * Instances are labelled A, B, C ... in start order.
   * @throws CheckFailed when it does not start (with its output)
   */
  async startServer(options: InstanceOptions = {}): Promise<ServerInstance> {
    if (this.stoppedFor !== undefined) throw new Error(`grading was stopped: ${this.stoppedFor}`);
    const taken = new Set(this.labels);
    if (options.label !== undefined && taken.has(options.label)) throw new Error(`startServer: label ${options.label} is taken`);
    let label = options.label;
    while (label === undefined || taken.has(label)) label = String.fromCharCode(65 + this.labelsGiven++);
    this.labels.push(label);
    if (this.copies === 0) this.copyWorkspace();
    const cwd = options.ownCopy || options.ownDatabase || options.database ? this.copyWorkspace() : path.dirname(this.dbPath);
    const database = options.database ?? (options.ownDatabase ? { dbPath: path.join(cwd, 'lab.db'), providerLog: path.join(cwd, 'provider.log') } : this.mainDatabase);
    const pod: (typeof this.pods)[number] = { folder: cwd, database };
    this.pods.push(pod);
    this.watchWrites();
    const image = this.ensureImage();
    // The grader's hand on this instance's provider (gate.ts): closed with the check.
    const gate = await openGate(sandboxOwner(this.command?.sandbox, this.workspace));
    this.openGates.push(gate);
    const instance = await startServer({
      workspace: cwd,
      dbPath: database.dbPath,
      providerLog: database.providerLog,
      label,
      command: this.command,
      scratch: this.tmpDir,
      student: this.workspace,
      // A pod's own HOME, /tmp and socket, beside its copy of the workspace (renewCopies leaves a running pod's alone).
      ownDir: path.dirname(cwd),
      // In a sandbox: the image's entries bound read-only over their placeholders, the
      // image itself never given to the sandbox's user, and only the pod's own folder and
      // its database's folders writable.
      readOnly: this.sandboxed ? imageBinds(image, cwd) : [],
      shared: [path.dirname(image.dir)],
      readable: this.command && this.sandboxed ? [interpreterHome(image, this.command.file)].filter((home): home is string => home !== undefined) : [],
      writable: [...new Set([path.dirname(cwd), path.dirname(database.dbPath), path.dirname(database.providerLog)])],
      chargeMs: options.chargeMs,
      dbMs: options.dbMs,
      priority: options.priority,
      env: options.env,
      // Far from UTC, by the seed: a server's times must not depend on where it runs.
      timeZone: serverTimeZone(this.data.seed),
      gateSocket: gate.socketPath,
      dbGate: options.dbGate,
      clockOffsetS: options.clockOffsetS,
      readyTimeoutMs: this.limits.startMs,
    }).catch((err: unknown) => {
      pod.failed = true;
      gate.close();
      throw err;
    });
    this.gates.set(instance, gate);
    pod.instance = instance;
    this.servers.push(instance);
    this.databaseOf.set(instance, database);
    if (this.stoppedFor !== undefined) {
      // Up after the check was over: stopped with everything it holds (its gate, the disk watcher).
      await this.stopAll();
      throw new Error(`grading was stopped: ${this.stoppedFor}`);
    }
    return instance;
  }

  /**
   * Cuts the check short: stops every instance now (so requests in flight fail at once)
   * and makes any later startServer throw. A server still starting is stopped as soon as
   * it is up or its start time limit runs out. Never throws.
   * @param reason one sentence, shown in the verdict
   */
  async abort(reason: string): Promise<void> {
    this.stoppedFor = reason;
    await this.stopAll();
  }

  /**
   * A database (and a provider's statement) for instances started with `database:` it,
   * shared by them only: `TMP/<random>/<the workspace's own name>/lab.db`, in a folder no
   * instance runs in. Nothing is created until a server opens it.
   */
  newDatabase(): CheckDatabase {
    const dir = path.join(this.tmpDir, crypto.randomBytes(4).toString('hex'), path.basename(this.workspace));
    fs.mkdirSync(dir, { recursive: true });
    return { dbPath: path.join(dir, 'lab.db'), providerLog: path.join(dir, 'provider.log') };
  }

  /**
   * What the servers created beside a database: every entry of IDEM_DB's folder (a copy of
   * the workspace) that is neither one of the learner's own (a name the workspace has and
   * the copy took) nor the database's: its file, that file's `-wal`, `-shm` and `-journal`
   * (sqlite's own), and the provider's statement. Read with lstat: nothing is followed.
   * @param of an instance or a database (default: the check's own)
   * @returns the absolute paths, sorted
   */
  createdBeside(of?: ServerInstance | CheckDatabase): string[] {
    const { dbPath, providerLog } = this.database(of);
    const folder = path.dirname(dbPath);
    const base = path.basename(dbPath);
    const own = new Set([base, `${base}-wal`, `${base}-shm`, `${base}-journal`, path.basename(providerLog)]);
    let learners: Set<string>;
    let entries: string[];
    try {
      learners = new Set(fs.readdirSync(this.workspace).filter((entry) => entry === 'node_modules' || !NOT_COPIED.test(entry)));
      entries = fs.readdirSync(folder);
    } catch {
      return [];
    }
    return entries
      .filter((entry) => !own.has(entry) && !learners.has(entry))
      .map((entry) => path.join(folder, entry))
      .sort();
  }

  /**
   * Every regular file the servers wrote in the folders they may write (a sandbox's
   * writable binds: each pod's folder with its HOME, its /tmp and its working folder, and
   * each database's folder), read as written-files.ts reads (never through a link, only
   * regular files, reached through the folder above each opened O_NOFOLLOW), within
   * `limits`. Passed over: every database of the check (IDEM_DB, its `-wal`, `-shm` and
   * `-journal`) and its provider's statement, and hard links to the workspace image's
   * files; the learner's own entries at the top of each working folder (placeholders
   * under a sandbox) are read last.
   * @returns the files read (`root` of each is its pod's folder or its database's folder),
   *   and `cut` when a bound left something unread (see readWritten)
   */
  writtenFiles(limits: WrittenLimits): WrittenRead {
    const databases = [this.mainDatabase, ...this.databaseOf.values(), ...this.pods.map((p) => p.database)];
    const own = new Set(databases.flatMap((db) => [db.dbPath, `${db.dbPath}-wal`, `${db.dbPath}-shm`, `${db.dbPath}-journal`, db.providerLog]));
    const folders = this.pods.map((p) => p.folder);
    const roots = [...new Set([...this.pods.flatMap((p) => [path.dirname(p.folder), path.dirname(p.database.dbPath), path.dirname(p.database.providerLog)])])];
    // A root inside another root is read with it.
    const top = roots.filter((root) => !roots.some((other) => other !== root && root.startsWith(other + path.sep)));
    const learners = new Set(this.image?.top.map((e) => e.name) ?? []);
    return readWritten(top, limits, {
      skip: (full) => own.has(full),
      later: (full) => folders.includes(path.dirname(full)) && learners.has(path.basename(full)),
      skipInodes: this.image?.inodes,
    });
  }

  /** The check's own database, the one every instance shares unless started with ownDatabase. */
  get mainDatabase(): CheckDatabase {
    return { dbPath: this.dbPath, providerLog: this.providerLog };
  }

  /**
   * The database an instance runs on (the check's own one for an instance not of this
   * check, or none given); a CheckDatabase given is returned as it is.
   */
  database(of?: ServerInstance | CheckDatabase): CheckDatabase {
    if (of && 'providerLog' in of) return of;
    return (of && this.databaseOf.get(of)) ?? this.mainDatabase;
  }

  /**
   * Every database of the check that an exchange went to, with those exchanges in the
   * order sent: the check's own first (with every exchange no instance of another
   * database answered). Each is audited on its own (audit.ts).
   */
  databases(): Array<CheckDatabase & { exchanges: Exchange[] }> {
    const byLabel = new Map(this.servers.map((s) => [s.label, this.database(s)]));
    const groups = new Map<string, CheckDatabase & { exchanges: Exchange[] }>([[this.dbPath, { ...this.mainDatabase, exchanges: [] }]]);
    for (const exchange of this.exchanges) {
      const db = byLabel.get(exchange.server) ?? this.mainDatabase;
      if (!groups.has(db.dbPath)) groups.set(db.dbPath, { ...db, exchanges: [] });
      groups.get(db.dbPath)!.exchanges.push(exchange);
    }
    return [...groups.values()];
  }

  /** How many instances of this check came up (answered GET /health), stopped ones included. */
  get startedCount(): number {
    return this.servers.length;
  }

  /** Adds advice that does not fail the step (the Notes interface of track.ts). */
  warn(message: string): void {
    this.warnings.push(message);
  }

  /** Stops one instance (its whole process group) and waits until it is gone. */
  async stopServer(instance: ServerInstance): Promise<void> {
    await instance.stop();
  }

  /**
   * Stops every instance this check started; never throws. A sandboxed one is killed at
   * once (ServerInstance.kill): nothing it started can outlive its sandbox, and the check
   * is done with it. One without a sandbox gets SIGTERM and its grace period, so that a
   * process it leaves running is found and reported (check.leftRunning).
   */
  async stopAll(): Promise<void> {
    await Promise.all(this.servers.map((s) => (s.sandboxed ? s.kill() : s.stop())));
    this.stopWatch?.();
    this.stopWatch = undefined;
    for (const gate of this.openGates.splice(0)) gate.close();
  }

  /**
   * Watches what this check's servers write, together, in the check's folder (the image
   * left out) until stopAll: past DEFAULT_DISK_BOUND (bytes allocated, or entries) every
   * server is stopped at once and the check ends failing with `overrun`, which names the
   * largest file. Started with the first server, again after a stopAll.
   */
  private watchWrites(): void {
    if (this.stopWatch) return;
    const bound = DEFAULT_DISK_BOUND;
    const imageDir = () => (this.image ? path.dirname(this.image.dir) : undefined);
    this.stopWatch = watchDisk(
      this.tmpDir,
      (use: DiskUse) => {
        this.stopWatch = undefined;
        const largest = use.largest ? t('check.diskOverrun.largest', { file: use.largest.file, bytes: use.largest.bytes }) : '';
        const message = use.entries > bound.entries
          ? t('check.diskOverrun.entries', { entries: use.entries, max: bound.entries })
          : t('check.diskOverrun.bytes', { bytes: use.bytes, max: bound.bytes });
        this.overrun = new CheckFailed(message, t('check.diskOverrun.why'), { details: largest ? [largest] : [], exchanges: this.exchanges.slice(-4) });
        void this.abort(message);
      },
      (full) => full === imageDir(),
      this.image?.inodes,
      bound,
    );
  }

  /**
   * The provider's gate of an instance this check started (gate.ts): the charges its
   * provider reported and the holds on them.
   * @throws Error for an instance of another check
   */
  gate(of: ServerInstance): ProviderGate {
    const gate = this.gates.get(of);
    if (!gate) throw new Error(`gate: server ${of.label} is not of this check`);
    return gate;
  }

  /**
   * What the grader decided at each instance's gate so far (gate.ts GateDecision: which
   * charges it held and let go together, which statements it let run in each wave), by
   * the instance's label. With the same seed, a check run again decides
   * the same (test/seed-replay.test.ts); nothing in it is a time.
   */
  gateDecisions(): Record<string, GateDecision[]> {
    return Object.fromEntries(this.servers.map((s) => [s.label, [...this.gate(s).decisions]]));
  }

  /**
   * Starts a lockstep over instances of this check started with `dbGate` (lockstep.ts):
   * their statements outside a transaction run in waves until stop().
   * The first wave waits for Lockstep.arm() (call it once the round's requests are written).
   * @throws Error for an instance of another check
   */
  lockstep(servers: ServerInstance[]): Lockstep {
    return lockstep(servers.map((s) => ({ gate: this.gate(s), target: { pid: s.pid, port: s.port, dbPath: s.dbPath } })));
  }

  /** The instances that left processes running when stopped (see ServerInstance.leftRunning): label and count. */
  leftRunning(): Array<{ server: string; count: number }> {
    return this.servers.filter((s) => s.leftRunning > 0).map((s) => ({ server: s.label, count: s.leftRunning }));
  }

  /**
   * The last output of every instance (or of those labelled `labels`) for a failure report:
   * every line `[A] …` with the label of the server that printed it, in print order (printed.ts).
   */
  serverOutput(labels?: string[]): string {
    return labelledOutput(this.servers.filter((s) => labels === undefined || labels.length === 0 || labels.includes(s.label)));
  }

  /**
   * Leaves the requests sent with `bodies`, and the charges and ledger rows of their user
   * and amount, out of the final audit (leftOut): only for a part of the check given up on
   * without a verdict, whose bodies no other part sent (seeded bodies never repeat).
   */
  leaveOut(bodies: Iterable<{ user: string; amount: number }>): void {
    for (const b of bodies) this.leftOut.add(leftOutId(b));
  }

  /** Whether a body (a request's, a charge's or a ledger row's user and amount) was left out of the final audit (leaveOut). */
  isLeftOut(body: { user: string; amount: number }): boolean {
    return this.leftOut.has(leftOutId(body));
  }

  /** A key no earlier request of this check used, from the seed: a UUID. */
  freshKey(): string {
    return this.data.key();
  }

  /** The time limits of a request to a server under test, in ms, by the run's limits (http.ts checkTimeouts). */
  timeouts(): Timeouts {
    return checkTimeouts(this.limits);
  }

  /** timeouts() with twice the time to answer, for a round on a slow database (http.ts slowDatabaseTimeouts). */
  slowDatabaseTimeouts(): Timeouts {
    return slowDatabaseTimeouts(this.limits);
  }

  /**
   * Sends one POST /pay and records the exchange; never throws (see Exchange.error).
   * `timeouts`: its time limits in ms (default timeouts()), e.g. a shorter wait for
   * the answer when a check retries within a deadline of its own.
   */
  async pay(server: ServerInstance, req: PayRequest, timeouts?: Timeouts): Promise<Exchange> {
    const meter = this.meter([server]);
    const exchange = await send(server, 'POST', '/pay', req, timeouts ?? this.timeouts());
    this.judgeStarvation([exchange], meter, timeouts);
    this.exchanges.push(exchange);
    return exchange;
  }

  /**
   * Starts measuring how starved `servers` and the grader are while a bound the step times
   * itself runs (a wait for a server's timer, say); stop() returns what was seen (sched.ts
   * Starvation, in ms), to be judged with starvedFor(seen, boundMs): a bound that ran out
   * while starved says nothing about the server (throw gate.ts Starved then).
   * `options.lowShare`: count only threads kept below that share of a CPU whose turns on one
   * were long in coming (sched.ts LOW_SHARE, LONG_TURN_WAIT_MS), for a bound that a server's
   * own busy or polling thread may run out too.
   */
  starveMeter(servers: ServerInstance[], options: { lowShare?: number } = {}): { stop(): Starvation } {
    const meter = this.meter(servers, options);
    return { stop: () => meter.stop() };
  }

  /** The servers' schedulers' watches (sched.ts), made on first use, one per instance. */
  private readonly schedWatches = new Map<ServerInstance, SchedWatch>();

  /**
   * A StarveMeter over `servers` for a request: it begins to look 250 ms after the request
   * was sent (a request answered sooner costs one timer). `options.lowShare` as StarveMeter's.
   */
  private meter(servers: ServerInstance[], options: { lowShare?: number } = {}): StarveMeter {
    return new StarveMeter(this.schedWatch(servers), { delayMs: 250, ...options });
  }

  /**
   * A watch on the threads of `servers` (sched.ts SchedWatch): one server's is made on first
   * use and kept (its processes are looked up once); several get one watch over all of them.
   */
  schedWatch(servers: ServerInstance[]): SchedWatch {
    if (servers.length === 1) {
      const [s] = servers;
      let watch = this.schedWatches.get(s);
      if (!watch) this.schedWatches.set(s, (watch = new SchedWatch([{ pid: s.pid, port: s.port, dbPath: s.dbPath }])));
      return watch;
    }
    return new SchedWatch(servers.map((s) => ({ pid: s.pid, port: s.port, dbPath: s.dbPath })));
  }

  /**
   * Marks the exchanges that ran out of time while the server or the grader was starved
   * (Exchange.starved): their missing answer says nothing about the server (expectStatus and
   * the race then report them inconclusive, gate.ts Starved).
   */
  private judgeStarvation(exchanges: Exchange[], meter: StarveMeter, timeouts: Timeouts | undefined): void {
    const seen = meter.stop();
    const { connectMs, answerMs } = timeouts ?? this.timeouts();
    for (const exchange of exchanges) {
      const bound = exchange.errorCode === 'timeout' ? answerMs : exchange.errorCode === 'connect-timeout' ? connectMs : undefined;
      if (bound !== undefined && starvedFor(seen, bound)) exchange.starved = { serverWaitMs: Math.round(seen.serverWaitMs), graderLagMs: Math.round(seen.graderLagMs), boundMs: bound };
    }
  }

  /**
   * Sends one request of any kind (e.g. `GET /payments/7`, `POST /payments/7/refund`) and
   * records the exchange; never throws (see Exchange.error). `req.body` is sent as JSON when
   * given; a GET is sent without a body.
   */
  async request(server: ServerInstance, method: 'GET' | 'POST', urlPath: string, req?: PayRequest): Promise<Exchange> {
    const meter = this.meter([server]);
    const exchange = await send(server, method, urlPath, req, this.timeouts());
    this.judgeStarvation([exchange], meter, undefined);
    this.exchanges.push(exchange);
    return exchange;
  }

  /**
   * Sends all requests at once (connections opened first), request i to servers[i % n],
   * and records the exchanges in request order.
   */
  async paySimultaneously(servers: ServerInstance[], requests: PayRequest[], timeouts?: Timeouts, onWritten?: () => void): Promise<Exchange[]> {
    const meter = this.meter(servers);
    const exchanges = await sendSimultaneously(servers, requests, timeouts ?? this.timeouts(), onWritten);
    this.judgeStarvation(exchanges, meter, timeouts);
    this.exchanges.push(...exchanges);
    return exchanges;
  }

  /**
   * The payment provider's statement: every charge() call of this check's servers, in
   * order, or undefined when the servers keep no statement (a server that is not built on
   * the lab's server.py). Lines that are not JSON are passed over. `of`: the statement
   * of that instance's database, or of that database (default: the check's own).
   */
  charges(of?: ServerInstance | CheckDatabase): Charge[] | undefined {
    const database = this.database(of);
    const charges = readStatement(database.providerLog);
    if (!charges) return charges;
    // Which server charged: the one (and only one) of this database's servers whose gate saw
    // a charge of that user and amount from that pid.
    const seenBy = new Map<string, Set<string>>();
    const seenAs = (pid: number | undefined, user: string, amount: number) => JSON.stringify([pid, user, amount]);
    for (const [server, gate] of this.gates) {
      if (this.database(server).providerLog !== database.providerLog) continue;
      for (const g of gate.charges) {
        const at = seenAs(g.pid, g.user, g.amount);
        seenBy.set(at, (seenBy.get(at) ?? new Set()).add(server.label));
      }
    }
    for (const charge of charges) {
      const labels = charge.pid === undefined ? undefined : seenBy.get(seenAs(charge.pid, charge.user, charge.amount));
      if (labels?.size === 1) [charge.server] = labels;
    }
    return charges;
  }

  /**
   * The charges of one payment body in the statement (see charges()): those whose `user`
   * and `amount` equal the body's exactly, in order; empty when the servers keep no
   * statement. `of` as for charges().
   */
  chargesFor(body: { user: string; amount: number }, of?: ServerInstance | CheckDatabase): Charge[] {
    return (this.charges(of) ?? []).filter((c) => c.user === body.user && c.amount === body.amount);
  }

  /**
   * Takes the database's write lock (BEGIN IMMEDIATE on a connection of the grader's own)
   * and returns the function that releases it, changing nothing. While it is held the
   * servers can read but every write waits: requests sent then all pass their look-ups
   * before any of them can claim a key, which makes a check-then-insert fail every time.
   * `of`: the database of that instance, or that database (default: the check's own);
   * `timeoutMs`: how long another connection's write lock is waited for (default 5000 ms;
   * 0: not at all).
   * @throws Error when the database does not exist or is locked for more than `timeoutMs`
   */
  holdWriteLock(of?: ServerInstance | CheckDatabase, timeoutMs = 5000): () => void {
    const db = openStudentDatabase(this.database(of).dbPath, { timeout: timeoutMs });
    try {
      db.exec('BEGIN IMMEDIATE');
    } catch (err) {
      db.close();
      throw err;
    }
    return () => {
      db.exec('ROLLBACK');
      db.close();
    };
  }

  /**
   * Writes one ledger row into the database of `of` (an instance, or a database; default the
   * check's own), as an earlier deployment would have left it: the contract's columns
   * (idempotency_key, user, amount, created_at, an ISO 8601 UTC text). Its key is kept in
   * seededKeys, so the final audit does not count it as a payment the server made.
   * @returns true when it was written; false when the ledger is not there or takes no such row
   */
  seedLedgerRow(of: ServerInstance | CheckDatabase | undefined, row: { key: string; user: string; amount: number; createdAt: string }): boolean {
    let db: ReturnType<typeof openStudentDatabase> | undefined;
    try {
      db = openStudentDatabase(this.database(of).dbPath);
      db.prepare('INSERT INTO ledger (idempotency_key, user, amount, created_at) VALUES (?, ?, ?, ?)').run(row.key, row.user, row.amount, row.createdAt);
      this.seededKeys.add(row.key);
      return true;
    } catch {
      return false;
    } finally {
      db?.close();
    }
  }

  /**
   * Every ledger row in this check's sqlite file (or, given `of`, in that instance's
   * database or that database), read-only.
   * @throws CheckFailed when the servers never created that file: they ignore IDEM_DB
   */
  ledger(of?: ServerInstance | CheckDatabase): LedgerRow[] {
    const { dbPath } = this.database(of);
    if (!fs.existsSync(dbPath)) {
      throw new CheckFailed(
        t('check.noDb', { db: dbPath }),
        t('check.noDb.why'),
        { exchanges: this.exchanges.slice(-4) },
      );
    }
    return readLedger(dbPath);
  }
}

/** A left-out body's entry in LiveContext.leftOut: its user, NUL, its amount. */
function leftOutId(body: { user: string; amount: number }): string {
  return `${body.user}\0${body.amount}`;
}
