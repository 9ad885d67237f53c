/**
 * rtc-node runs LiveKit's Rust SDK and has it send every log record over to Node, then drops them:
 * the engine's own account of an unanswered publication, a resumed signal connection or a failed
 * ICE check never reached our logs. This forwards them into the worker's log: warnings and errors
 * as warnings (the engine logs recoverable steps, such as "resuming connection", as errors; what
 * they cost a call is logged by the call itself), notes at debug, the rest (per-packet traces) not.
 * The engine is process-wide: a record does not say which call it is about.
 */
import type { Logger } from '../core/log.ts';

/** livekit.proto.LogLevel (rtc-node's FFI protocol). */
const LOG_ERROR = 0;
const LOG_WARN = 1;
const LOG_INFO = 2;

interface LogRecord {
  level?: number;
  target?: string;
  message?: string;
}

interface FfiEvents {
  on(event: 'ffi_event', listener: (ev: { message: { case?: string; value?: unknown } }) => void): unknown;
}

let forwardedFrom: FfiEvents | null = null;

/**
 * Starts forwarding, once per process. rtc-node creates its FFI client on first use (a Room's
 * connect, an AudioSource), so call it after that; it returns false while there is none yet.
 */
export function forwardRtcLogs(log: Logger): boolean {
  // Not exported by rtc-node: its FFI client keeps its one instance here.
  const ffi = (globalThis as { _ffiClientInstance?: FfiEvents })._ffiClientInstance;
  if (!ffi) return false;
  if (ffi === forwardedFrom) return true;
  forwardedFrom = ffi;
  ffi.on('ffi_event', (ev) => {
    if (ev.message.case !== 'logs') return;
    for (const r of (ev.message.value as { records?: LogRecord[] }).records ?? []) {
      const fields = { target: r.target, detail: r.message };
      if (r.level === LOG_ERROR || r.level === LOG_WARN) log.warn(fields, 'webrtc engine reported a problem');
      else if (r.level === LOG_INFO) log.debug(fields, 'webrtc engine note');
    }
  });
  return true;
}
