/**
 * The body's cursor: where in its idle loop an avatar is at any moment. Each avatar's loop plays on
 * a clock of its own that never stops (wall time, from the Unix epoch), so the frame a turn starts
 * on is where the body is right then, and consecutive turns continue the body: between two turns
 * it kept moving exactly as a client that plays the idle loop on at real time shows it. Stateless:
 * every process (and every concurrent turn of one avatar) agrees on it.
 */

/** The loop frame an avatar's body shows at wall time `atMs` (milliseconds since the epoch). */
export function loopFrameAt(atMs: number, fps: number, frameCount: number): number {
  return Math.floor((atMs * fps) / 1000) % frameCount;
}
