import { Writable } from 'node:stream';
import { AudioSource, Room } from '@livekit/rtc-node';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { freePort } from '../test/deps.ts';
import { token } from './test-support.ts';
import { forwardRtcLogs } from './rtc-logs.ts';

function capturingLogger(level: string) {
  const lines: { level: number; msg: string; target?: string; detail?: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as (typeof lines)[number]);
      cb();
    },
  });
  return { log: pino({ level }, sink), lines };
}

describe("the WebRTC engine's own log", () => {
  it("reaches the worker's log: a connection the engine cannot make is logged as a warning with its reason, once however often forwarding is asked for", { timeout: 20_000 }, async () => {
    const { log, lines } = capturingLogger('info');
    // rtc-node's FFI client exists from its first use.
    await new AudioSource(24_000, 1, 100).close();
    expect(forwardRtcLogs(log)).toBe(true);
    expect(forwardRtcLogs(log)).toBe(true);
    // What the engine sent, counted beside the forwarder.
    let sent = 0;
    (globalThis as unknown as { _ffiClientInstance: { on(e: string, l: (ev: { message: { case?: string; value?: { records: { level?: number }[] } } }) => void): void } })._ffiClientInstance.on('ffi_event', (ev) => {
      if (ev.message.case === 'logs') sent += ev.message.value!.records.filter((r) => r.level === 0 || r.level === 1).length;
    });

    const closedPort = await freePort();
    const room = new Room();
    await expect(room.connect(`ws://127.0.0.1:${closedPort}`, await token('nowhere', 'avatar'), { autoSubscribe: false, dynacast: false })).rejects.toThrow();
    // The engine sends its records in batches (every few ms).
    await new Promise((r) => setTimeout(r, 500));

    const refused = lines.filter((l) => l.msg === 'webrtc engine reported a problem' && /refused/i.test(l.detail ?? ''));
    expect(refused.length, JSON.stringify(lines.slice(-5))).toBeGreaterThan(0);
    expect(refused[0]).toMatchObject({ level: 40, target: expect.stringMatching(/^livekit/) });
    // Once: one line per record the engine sent, not one per call to forwardRtcLogs.
    expect(lines.filter((l) => l.msg === 'webrtc engine reported a problem').length).toBe(sent);
    // The engine's per-packet traces and notes stay out of an info-level log.
    expect(lines.every((l) => l.level >= 30)).toBe(true);
  });
});
