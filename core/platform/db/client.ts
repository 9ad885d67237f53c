import postgres from 'postgres';

export type Sql = postgres.Sql<{ bigint: number }>;
export type Tx = postgres.TransactionSql<{ bigint: number }>;

/**
 * postgres.js client. int8 comes back as a JS number: credit amounts stay far below 2^53
 * (9e15 micros is 285 years of realtime), and the API speaks JSON numbers anyway.
 */
export function connect(url: string, max = 10): Sql {
  return postgres(url, {
    max,
    onnotice: () => {},
    types: {
      bigint: {
        to: 20,
        from: [20],
        serialize: (x: number) => String(x),
        parse: (x: string) => Number(x),
      },
    },
  }) as unknown as Sql;
}

/**
 * Opens `n` of the pool's connections now. postgres.js opens one on first use, and each costs a
 * SCRAM handshake whose key derivation (pbkdf2Sync) runs on this thread: in an agent worker's first
 * call they were opened as the call started, 86 ms of its event loop among the frames of its first
 * seconds.
 */
export async function openConnections(sql: Sql, n: number): Promise<void> {
  await Promise.all(Array.from({ length: n }, () => sql`select 1`));
}
