/**
 * The wall clock's phase within its second: checks that probe how a server cuts times to
 * whole seconds send a request at a chosen place in a second. Engine code only: no lab
 * specifics.
 */

/**
 * How long to wait, in ms (0 to 999), until the wall clock reads `phaseMs` past a whole
 * second: 0 when it reads so now.
 * @param phaseMs the place in the second, in ms (0 to 999)
 * @param now the wall clock, in ms since the epoch (default Date.now())
 */
export function msUntilPhase(phaseMs: number, now: number = Date.now()): number {
  return (((phaseMs - (now % 1000)) % 1000) + 1000) % 1000;
}
