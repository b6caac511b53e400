import crypto from 'node:crypto';
import fs from 'node:fs';
import { t } from '../i18n/index.js';
import path from 'node:path';
import Database from 'better-sqlite3';
import { CheckFailed } from './failure.js';
import { readLedger } from './ledger.js';
import { send, sendSimultaneously, type PayRequest } from './http.js';
import { startServer, type ServerCommand, type ServerInstance } from './server.js';
import type { Exchange, LedgerRow } from './types.js';
import { readRegularSync } from './safe-read.js';

/** The most of the provider's statement read, in bytes (some 80 000 charges). */
const MAX_STATEMENT_BYTES = 8 * 1024 * 1024;

/** One line of the payment provider's statement: a call of charge(). */
export interface Charge {
  user: string;
  amount: number;
  /** ISO-8601 UTC time of the charge. */
  at: string;
  /** The server process that charged. */
  pid?: number;
}

/**
 * What a live check works with: server instances on free ports sharing one fresh sqlite
 * file in a temporary folder (never the learner's lab.db), an HTTP client that keeps
 * every exchange for the transcript, and the ledger read from that file.
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
  private readonly servers: ServerInstance[] = [];
  /** Labels handed out so far; counted at the call, so instances started together get distinct ones. */
  private labelsGiven = 0;
  private readonly command: ServerCommand | undefined;
  private readonly stepId: string;
  private stoppedFor: string | undefined;

  constructor(workspace: string, tmpDir: string, stepId: string, command?: ServerCommand) {
    this.workspace = workspace;
    this.dbPath = path.join(tmpDir, 'lab.db');
    this.providerLog = path.join(tmpDir, 'provider.log');
    this.stepId = stepId;
    this.command = command;
  }

  /**
   * Starts one more instance of the learner's server on this check's database.
   * Instances are labelled A, B, C ... in start order.
   * @throws CheckFailed when it does not start (with its output)
   */
  async startServer(): Promise<ServerInstance> {
    if (this.stoppedFor !== undefined) throw new Error(`grading was stopped: ${this.stoppedFor}`);
    const label = String.fromCharCode(65 + this.labelsGiven++);
    const instance = await startServer({ workspace: this.workspace, dbPath: this.dbPath, providerLog: this.providerLog, label, command: this.command });
    this.servers.push(instance);
    if (this.stoppedFor !== undefined) {
      await instance.stop();
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

  /** How many instances of this check came up (answered GET /health), stopped ones included. */
  get startedCount(): number {
    return this.servers.length;
  }

  /** Adds advice that does not fail the step (the Notes interface of steps/types.ts). */
  warn(message: string): void {
    this.warnings.push(message);
  }

  /** Stops one instance (its whole process group) and waits until it is gone. */
  async stopServer(instance: ServerInstance): Promise<void> {
    await instance.stop();
  }

  /** Stops every instance this check started; never throws. */
  async stopAll(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.stop()));
  }

  /** The instances that left processes running when stopped (see ServerInstance.leftRunning): label and count. */
  leftRunning(): Array<{ server: string; count: number }> {
    return this.servers.filter((s) => s.leftRunning > 0).map((s) => ({ server: s.label, count: s.leftRunning }));
  }

  /** The last output of every instance, labelled, for a failure report. */
  serverOutput(): string {
    return this.servers
      .filter((s) => s.output().trim() !== '')
      .map((s) => `[server ${s.label}, port ${s.port}]\n${s.output().trimEnd()}`)
      .join('\n');
  }

  /** A key no earlier request of this run used: `02-replay-3f9a1c`. */
  freshKey(name: string): string {
    return `${this.stepId}-${name}-${crypto.randomBytes(3).toString('hex')}`;
  }

  /** Sends one POST /pay and records the exchange; never throws (see Exchange.error). */
  async pay(server: ServerInstance, req: PayRequest): Promise<Exchange> {
    const exchange = await send(server, 'POST', '/pay', req);
    this.exchanges.push(exchange);
    return exchange;
  }

  /**
   * Sends all requests at once (connections opened first), request i to servers[i % n],
   * and records the exchanges in request order.
   */
  async paySimultaneously(servers: ServerInstance[], requests: PayRequest[]): Promise<Exchange[]> {
    const exchanges = await sendSimultaneously(servers, requests);
    this.exchanges.push(...exchanges);
    return exchanges;
  }

  /**
   * The payment provider's statement: every charge() call of this check's servers, in
   * order, or undefined when the servers keep no statement (a server that is not built on
   * the lab's server.py). Lines that are not JSON are passed over.
   */
  charges(): Charge[] | undefined {
    // Bounded: a server writes this file; a FIFO or a huge file must not stall the grader.
    const text = readRegularSync(this.providerLog, MAX_STATEMENT_BYTES);
    if (text === undefined) return undefined;
    const charges: Charge[] = [];
    for (const line of text.split('\n')) {
      try {
        const charge = JSON.parse(line) as Charge;
        if (typeof charge.user === 'string') charges.push(charge);
      } catch {
        // a partial or foreign line
      }
    }
    return charges;
  }

  /**
   * Takes the database's write lock (BEGIN IMMEDIATE on a connection of the grader's own)
   * and returns the function that releases it, changing nothing. While it is held the
   * servers can read but every write waits: requests sent then all pass their look-ups
   * before any of them can claim a key, which makes a check-then-insert fail every time.
   * @throws Error when the database does not exist or is locked for more than 5 s
   */
  holdWriteLock(): () => void {
    const db = new Database(this.dbPath, { fileMustExist: true, timeout: 5000 });
    db.exec('BEGIN IMMEDIATE');
    return () => {
      db.exec('ROLLBACK');
      db.close();
    };
  }

  /**
   * Every ledger row in this check's sqlite file, read-only.
   * @throws CheckFailed when the servers never created that file: they ignore IDEM_DB
   */
  ledger(): LedgerRow[] {
    if (!fs.existsSync(this.dbPath)) {
      throw new CheckFailed(
        t('check.noDb', { db: this.dbPath }),
        t('check.noDb.why'),
        { exchanges: this.exchanges.slice(-4) },
      );
    }
    return readLedger(this.dbPath);
  }
}
