/**
 * The shape every render child process shares: one JSON request as its argument, one JSON line of
 * result on stdout, exit 0; anything thrown is printed and exits 1. The parent holds the IPC
 * channel: when it dies, so does the child.
 */
export function runAsChild<Request, Result>(run: (request: Request) => Promise<Result>): void {
  process.on('disconnect', () => process.exit(1));
  (async () => {
    const request = JSON.parse(process.argv[2] ?? '') as Request;
    process.stdout.write(`${JSON.stringify(await run(request))}\n`);
  })().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
      process.exit(1);
    },
  );
}
