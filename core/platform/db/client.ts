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
