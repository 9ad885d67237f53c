/**
 * A fetch whose response bodies fail when they stall. HTTP clients' timeouts (the OpenAI SDK's
 * included) end with the response head: a model that sends its head and then nothing (an
 * overloaded provider, a stuck proxy) would hold whoever reads its answer forever.
 */

export class StalledResponse extends Error {
  override name = 'StalledResponse';
}

/**
 * `base`, with each response body failing (`StalledResponse`) once no byte has arrived for
 * `idleMs` while its reader waits for one: the clock runs only during a read, so a slow reader is
 * never taken for a stalled server.
 */
export function stallGuardedFetch(idleMs: number, base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const res = await base(input, init);
    if (!res.body) return res;
    const source = res.body.getReader();
    const body = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          let timer: NodeJS.Timeout | undefined;
          const stalled = new Promise<never>((_, reject) => {
            timer = setTimeout(
              () => reject(new StalledResponse(`The response sent nothing for ${idleMs / 1000} s`)),
              idleMs,
            );
          });
          try {
            const chunk = await Promise.race([source.read(), stalled]);
            if (chunk.done) controller.close();
            else controller.enqueue(chunk.value);
          } catch (err) {
            controller.error(err);
            // Frees the connection (a stalled one would otherwise stay open).
            source.cancel(err).catch(() => {});
          } finally {
            clearTimeout(timer);
          }
        },
        cancel: (reason) => source.cancel(reason),
      },
      // Pulls only when read: the idle clock runs while someone waits.
      { highWaterMark: 0 },
    );
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}
