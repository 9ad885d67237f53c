import net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ephemeralRange, freePort } from './free-port.ts';

describe('freePort', () => {
  afterEach(() => vi.restoreAllMocks());

  it('gives a port below the ephemeral range, so no outgoing connection can take it before the server binds it', async () => {
    const [low] = ephemeralRange();
    for (let i = 0; i < 20; i++) {
      const port = await freePort();
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(low);
    }
  });

  it('passes over a port something listens on, on any address', async () => {
    const held = await freePort();
    const listener = net.createServer();
    await new Promise<void>((r) => listener.listen(held, '127.0.0.1', () => r()));
    try {
      const span = ephemeralRange()[0] - 10_000;
      const draw = (port: number) => (port - 10_000 + 0.5) / span;
      const next = held === 10_000 ? 10_001 : held - 1;
      vi.spyOn(Math, 'random').mockReturnValueOnce(draw(held)).mockReturnValueOnce(draw(next));
      expect(await freePort()).toBe(next);
    } finally {
      await new Promise((r) => listener.close(r));
    }
  });
});
