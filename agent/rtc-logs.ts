/**
 * rtc-node starts LiveKit's Rust SDK (its WebRTC engine) with log capture on, which makes the engine
 * send every record it logs, trace level included, over to Node one callback at a time (70-140 a
 * second per connection, each decoded on the event loop), and then drops them. That cost a live
 * call 5-7% of its CPU (`npm run bench -- sessions`, side by side). This turns the capture off,
 * once per process: the engine then logs through its own logger, to stderr, filtered by `RUST_LOG`
 * (default `warn`: a lost signal connection, a resume, an unanswered publication).
 *
 * rtc-node's own logger (pino, `"name":"lk-rtc"`) logs at debug unless NODE_ENV is `production`
 * when it loads: a line for every data stream it ignores. It takes the process's LOG_LEVEL here.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { AudioSource } from '@livekit/rtc-node';
import { demoteCallEndRaces } from './call-end-races.ts';

/** A message type of rtc-node's FFI protocol (protobuf-es). */
interface FfiMessageType {
  fromBinary(data: Uint8Array): unknown;
}

interface FfiBindings {
  livekitInitialize(callback: (data: Uint8Array) => void, captureLogs: boolean, sdkVersion: string): void;
  FfiEvent: FfiMessageType;
  FfiRequest: FfiMessageType;
  FfiResponse: FfiMessageType;
}

interface FfiClient {
  emit(event: 'ffi_event', ev: unknown): boolean;
}

let quieted = false;

/**
 * Turns the engine's log capture off for this process (idempotent), and sets rtc-node's logger to
 * `level`. Call it before the first connection.
 */
export function quietRtcLogs(level = 'info'): void {
  const logger = rtcNodeLogger();
  demoteCallEndRaces(logger);
  logger.level = level;
  if (quieted) return;
  quieted = true;
  // Read once, when the engine starts (rtc-node's first call into it, just below).
  process.env.RUST_LOG ??= 'warn';
  // rtc-node's FFI client starts the engine (capture on) on first use, and keeps itself here.
  void new AudioSource(24_000, 1).close();
  const client = (globalThis as { _ffiClientInstance?: FfiClient })._ffiClientInstance;
  if (!client)
    throw new Error("rtc-node's FFI client is not where it keeps it: check quietRtcLogs against this rtc-node version");
  // The engine's configuration is its event callback and the capture flag, replaced as a whole:
  // the same callback as rtc-node's (decode, hand to its client), capture off.
  const rtcNode = createRequire(import.meta.url).resolve('@livekit/rtc-node');
  const bindings = rtcFfiBindings();
  const { version } = JSON.parse(readFileSync(path.join(path.dirname(rtcNode), '..', 'package.json'), 'utf8')) as {
    version: string;
  };
  bindings.livekitInitialize((data) => client.emit('ffi_event', bindings.FfiEvent.fromBinary(data)), false, version);
}

/** The FFI bindings rtc-node loads (its engine, and the protocol's message types). */
export function rtcFfiBindings(): FfiBindings {
  const rtcNode = createRequire(import.meta.url).resolve('@livekit/rtc-node');
  return createRequire(rtcNode)('@livekit/rtc-ffi-bindings') as FfiBindings;
}

/** rtc-node's logger: the module instance its index loads (not exported, so reached by file). */
function rtcNodeLogger(): { level: string } {
  const rtcNode = createRequire(import.meta.url).resolve('@livekit/rtc-node');
  const file = path.join(path.dirname(rtcNode), 'log.cjs');
  return (createRequire(rtcNode)(file) as { log: { level: string } }).log;
}
