import { createRequire } from 'node:module';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { demoteCallEndRaces, isCallEndRace } from './call-end-races.ts';

type Pino = (
  opts: object,
  stream: Writable,
) => {
  error: (...a: unknown[]) => void;
  child: (b: object) => { error: (...a: unknown[]) => void };
};

/** The pino each library logs with (agents-js and rtc-node carry their own versions). */
function pinoOf(pkg: string): Pino {
  const req = createRequire(createRequire(import.meta.url).resolve(pkg));
  return req('pino') as Pino;
}

function capture(pino: Pino) {
  const levels: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      const rec = JSON.parse(chunk.toString()) as { level: number; msg: string };
      levels.push({ level: rec.level, msg: rec.msg });
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), levels };
}

const abort = Object.assign(new Error('This operation was aborted'), { name: 'AbortError' });

describe('errors logged as a call ends', () => {
  for (const pkg of ['@livekit/agents', '@livekit/rtc-node'])
    it(`happy: are warnings through ${pkg}'s pino, on the logger and the children it makes; other errors stay errors`, () => {
      const { logger, levels } = capture(pinoOf(pkg));
      demoteCallEndRaces(logger);
      demoteCallEndRaces(logger); // once is enough: a second call changes nothing
      logger.error(abort, 'Failed to update agent state attributes');
      logger.child({ room: 'r' }).error('error reading stream: %s', new Error('Disconnected while receiving'));
      logger.error(new Error('permission denied'), 'Failed to update agent state attributes');
      logger.error('error reading stream: %s', new Error('invalid header'));
      expect(levels).toEqual([
        { level: 40, msg: 'Failed to update agent state attributes' },
        { level: 40, msg: 'error reading stream: Error: Disconnected while receiving' },
        { level: 50, msg: 'Failed to update agent state attributes' },
        { level: 50, msg: 'error reading stream: Error: invalid header' },
      ]);
    });

  it('error: a message alone, or another message with a disconnect, is no race', () => {
    expect(isCallEndRace(['Failed to update agent state attributes'])).toBe(false);
    expect(isCallEndRace([new Error('Disconnected'), 'could not publish'])).toBe(false);
    expect(isCallEndRace([{ err: 1 }])).toBe(false);
  });
});
