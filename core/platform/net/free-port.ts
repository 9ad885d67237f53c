import { readFileSync } from 'node:fs';
import net from 'node:net';

/**
 * A TCP port that nothing listens on now, for a server this process is about to start (the embedded
 * PostgreSQL, and test servers). It is drawn below the kernel's ephemeral range: a port the kernel
 * hands out (listen on 0) is also one it may give the next outgoing connection of any process before
 * our server binds it, which CI saw as EADDRINUSE.
 */
export async function freePort(): Promise<number> {
  const highest = ephemeralRange()[0] - 1;
  for (let attempt = 0; attempt < 64; attempt++) {
    const port = LOWEST_PORT + Math.floor(Math.random() * (highest - LOWEST_PORT + 1));
    if (await listenable(port)) return port;
  }
  return kernelChosenPort();
}

/** Above the well-known and most registered service ports. */
const LOWEST_PORT = 10_000;

/** The kernel's ephemeral range: Linux says; elsewhere the widest common default (BSD and macOS: 49152-65535). */
export function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low! > LOWEST_PORT + 1000 && high! >= low!) return [low!, high!];
  } catch {
    // not Linux
  }
  return [32768, 65535];
}

/** Whether a listener can bind the port on every interface (which conflicts with any address's listener). */
function listenable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, () => srv.close(() => resolve(true)));
  });
}

function kernelChosenPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}
