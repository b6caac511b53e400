import fs from 'node:fs';
import path from 'node:path';

/**
 * A server whose wall clock the grader moves on (InstanceOptions.clockOffsetS): libfaketime
 * (Debian/Ubuntu: `apt-get install faketime`) preloaded into the server's own process, so
 * that time(), gettimeofday() and clock_gettime() read that many seconds ahead, and with
 * them Python's datetime.now() and time.time() and sqlite's datetime('now'). Only the
 * server's command is run under it (through env), never the sandbox, the relay or the
 * privilege drop before it. The monotonic clock is moved by the same offset: libfaketime
 * 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC=1 breaks Python 3.11's time.sleep()
 * (clock_nanosleep with TIMER_ABSTIME: EINVAL, libfaketime issue 426).
 *
 * A preload moves no clock read without the C library (a static binary, a runtime that
 * calls the vDSO itself): a check that moves a clock must see that it moved (a time the
 * server wrote) before it judges anything by it, and pass over its round otherwise.
 */

/** Where libfaketime's library is looked for, in order (Debian's multiarch folders first, then other layouts). */
const LIBRARY_PLACES = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/faketime/libfaketime.so.1',
  '/usr/lib64/faketime/libfaketime.so.1',
  '/usr/local/lib/faketime/libfaketime.so.1',
];

let found: string | null | undefined;

/**
 * The absolute path of libfaketime's preload library on this machine, or undefined when
 * it is not installed (then no clock can be moved). Looked up once per process: the
 * grader's IDEM_FAKETIME_LIB when set (a library elsewhere; empty or `none`: act as if
 * libfaketime were missing), else the places in LIBRARY_PLACES, then any
 * `/usr/lib/<triplet>/faketime/libfaketime.so.1`. Never throws.
 */
export function fakeClockLibrary(): string | undefined {
  const given = process.env.IDEM_FAKETIME_LIB;
  if (given !== undefined) return given === '' || given === 'none' || !path.isAbsolute(given) || !fs.existsSync(given) ? undefined : given;
  if (found === undefined) {
    const multiarch = (() => {
      try {
        return fs.readdirSync('/usr/lib').map((dir) => path.join('/usr/lib', dir, 'faketime', 'libfaketime.so.1'));
      } catch {
        return [];
      }
    })();
    found = [...LIBRARY_PLACES, ...multiarch].find((file) => {
      try {
        return fs.statSync(file).isFile();
      } catch {
        return false;
      }
    }) ?? null;
  }
  return found ?? undefined;
}

/** The env program that runs the server's command with the preload: /usr/bin/env, or /bin/env. */
function envProgram(): string {
  return fs.existsSync('/usr/bin/env') ? '/usr/bin/env' : '/bin/env';
}

/**
 * The command line `argv` run with its wall clock `offsetS` seconds ahead (a whole number;
 * negative: behind): `env LD_PRELOAD=<libfaketime> FAKETIME=+<offsetS> <argv...>`.
 * @throws Error when libfaketime is not installed (ask fakeClockLibrary first)
 */
export function withFakeClock(offsetS: number, argv: readonly string[]): string[] {
  const library = fakeClockLibrary();
  if (!library) throw new Error('withFakeClock: libfaketime is not installed (apt-get install faketime)');
  const offset = Math.round(offsetS);
  return [envProgram(), `LD_PRELOAD=${library}`, `FAKETIME=${offset >= 0 ? '+' : ''}${offset}`, ...argv];
}
