/**
 * What agents-js and rtc-node log as errors when a call's room goes away under something still in
 * flight (the agent's state attribute being set, a data stream being read): a call released
 * through the API, or its room deleted. The call ended; nothing failed. Logged as warnings, so that
 * an operator's alert on error records means a fault.
 */

/** The lines, by their message and the error they carry (a different cause stays an error). */
const CALL_END_RACES: { message: RegExp; cause: RegExp }[] = [
  // agents-js's RoomIO sets `lk.agent.state` on each state change, the last ones as the room closes.
  { message: /^Failed to update agent state attributes$/, cause: /abort|disconnect/i },
  // rtc-node's reader of an incoming text or byte stream, its room disconnected mid-stream.
  { message: /^error reading stream/, cause: /disconnect/i },
];

/** Whether a pino call's arguments (`(obj, msg)` or `(msg, ...args)`) are one of those races. */
export function isCallEndRace(args: unknown[]): boolean {
  const msgIndex = typeof args[0] === 'string' ? 0 : 1;
  const message = args[msgIndex];
  if (typeof message !== 'string') return false;
  const cause = [args[0], ...args.slice(msgIndex + 1)].map(textOf).join(' ');
  return CALL_END_RACES.some((r) => r.message.test(message) && r.cause.test(cause));
}

function textOf(v: unknown): string {
  if (v instanceof Error) return `${v.name} ${v.message}`;
  return typeof v === 'string' ? v : '';
}

type HookedLogger = Record<symbol, unknown> & { level: string; warn: (...args: unknown[]) => void };
type LogMethodHook = (this: HookedLogger, args: unknown[], method: (...a: unknown[]) => void, level: number) => void;

/**
 * Logs those races as warnings through `logger` (a pino logger) and the children it makes from now
 * on: a `logMethod` hook on it (pino reads hooks when a logger's level is set, a child's included).
 */
export function demoteCallEndRaces(logger: object): void {
  const target = logger as HookedLogger;
  let hooksOwner: object | null = target;
  let sym: symbol | undefined;
  for (; hooksOwner && !sym; hooksOwner = Object.getPrototypeOf(hooksOwner) as object | null)
    sym = Object.getOwnPropertySymbols(hooksOwner).find((s) => s.description === 'pino.hooks');
  if (!sym) throw new Error('the logger has no pino hooks: check demoteCallEndRaces against its pino version');
  const hooks = (target[sym] ?? {}) as { logMethod?: LogMethodHook };
  if ((hooks.logMethod as { callEndRaces?: true } | undefined)?.callEndRaces) return;
  const previous = hooks.logMethod;
  const logMethod: LogMethodHook = function (args, method, level) {
    if (level === 50 && isCallEndRace(args)) return this.warn(...args);
    if (previous) return previous.call(this, args, method, level);
    method.apply(this, args);
  };
  Object.assign(logMethod, { callEndRaces: true });
  target[sym] = { ...hooks, logMethod };
  // Setting the level again makes its methods anew, through the hook.
  const level = target.level;
  target.level = level;
}
