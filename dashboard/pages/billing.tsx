import { useEffect, useState, type FormEvent } from 'react';
import type { CreditBalance, Schemas } from '../../client/index.ts';
import { apiClient, type Session } from '../api.ts';
import { FormBanner, formatCredits, formatDate, useAction } from '../ui.tsx';

type UsageRow = Schemas['SessionUsage'];
type Recording = Schemas['Recording'];
const DAYS = 30;

/** Credits billed per UTC day over the last DAYS days, oldest first. */
function perDay(rows: UsageRow[]): { day: string; micros: number }[] {
  const days = new Map<string, number>();
  const today = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate());
  for (let i = DAYS - 1; i >= 0; i--) days.set(new Date(today - i * 86_400_000).toISOString().slice(0, 10), 0);
  for (const r of rows) {
    const day = (r.endedAt ?? r.createdAt).slice(0, 10);
    if (days.has(day)) days.set(day, days.get(day)! + r.billedCreditMicros);
  }
  return [...days].map(([day, micros]) => ({ day, micros }));
}

/** Credits used per day, as bars (inline SVG: no chart library, nothing fetched). */
function UsageChart({ rows }: { rows: UsageRow[] }) {
  const days = perDay(rows);
  const max = Math.max(1, ...days.map((d) => d.micros));
  const w = 720;
  const h = 160;
  const bar = w / days.length;
  return (
    <svg className="chart" viewBox={`0 0 ${w} ${h + 20}`} role="img" aria-label="Credits used per day">
      <text x={4} y={12} className="axis">
        {`peak ${formatCredits(max)} a day`}
      </text>
      {days.map((d, i) => {
        const bh = (d.micros / max) * h;
        return (
          <g key={d.day}>
            <rect x={i * bar + 2} y={h - bh} width={bar - 4} height={Math.max(bh, 0.5)} className="bar">
              <title>{`${d.day}: ${formatCredits(d.micros)}`}</title>
            </rect>
            {i % 5 === 4 && (
              <text x={i * bar + bar / 2} y={h + 14} textAnchor="middle" className="axis">
                {d.day.slice(5)}
              </text>
            )}
          </g>
        );
      })}
    </svg>
  );
}

function Recordings({ session }: { session: Session }) {
  const [recordings, setRecordings] = useState<Recording[]>([]);
  const [playing, setPlaying] = useState<{ id: string; url: string } | undefined>();
  const { error, run } = useAction();
  useEffect(() => void run(async () => setRecordings((await apiClient(session).recordings.list()).data)), []);
  return (
    <section className="card">
      <h2>Recordings</h2>
      <FormBanner error={error} fields={[]} />
      {recordings.length === 0 && <p className="muted">No recordings (an operator turns them on per workspace).</p>}
      <ul className="plain">
        {recordings.map((r) => (
          <li key={r.id}>
            {formatDate(r.createdAt)} · {r.sessionId} · {r.status}
            {r.durationSeconds !== null && ` · ${r.durationSeconds.toFixed(0)} s`}{' '}
            {r.status === 'ready' && (
              <button
                onClick={() =>
                  void run(async () =>
                    setPlaying({ id: r.id, url: (await apiClient(session).recordings.access(r.id)).url }),
                  )
                }
              >
                Play
              </button>
            )}
          </li>
        ))}
      </ul>
      {playing && <video key={playing.id} className="player" src={playing.url} controls autoPlay />}
    </section>
  );
}

function Balance({ balance }: { balance: CreditBalance }) {
  return (
    <section className="card balance">
      <div>
        <div className="big" data-testid="available">
          {formatCredits(balance.availableCreditMicros)}
        </div>
        <div className="muted">available (one credit second is a second of avatar time)</div>
      </div>
      <div>
        Balance {formatCredits(balance.balanceCreditMicros)} · reserved {formatCredits(balance.reservedCreditMicros)} ·
        used so far {formatCredits(balance.lifetimeUsedCreditMicros)}
      </div>
      <p className="muted">To top up, ask the operator of this service (credits are granted with the admin CLI).</p>
    </section>
  );
}

function SessionsTable({ rows }: { rows: UsageRow[] }) {
  return (
    <table className="sessions">
      <thead>
        <tr>
          <th>Session</th>
          <th>Kind</th>
          <th>Status</th>
          <th>End user</th>
          <th>Started</th>
          <th>Billable</th>
          <th>Billed</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r) => (
          <tr key={r.sessionId}>
            <td>
              <code>{r.sessionId}</code>
            </td>
            <td>{r.kind}</td>
            <td>{r.status}</td>
            <td>{r.endUserId ?? '—'}</td>
            <td>{formatDate(r.startedAt)}</td>
            <td>{r.billableSeconds} s</td>
            <td>{formatCredits(r.billedCreditMicros)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function BillingPage({ session }: { session: Session }) {
  const [balance, setBalance] = useState<CreditBalance | undefined>();
  const [rows, setRows] = useState<UsageRow[]>([]);
  const [chartRows, setChartRows] = useState<UsageRow[]>([]);
  const [endUserId, setEndUserId] = useState('');
  const { error, run } = useAction();

  async function sessions(filter: string): Promise<UsageRow[]> {
    const from = new Date(Date.now() - DAYS * 86_400_000).toISOString();
    const all: UsageRow[] = [];
    let cursor: string | undefined;
    // At most 10 pages of 100: the chart of a busy month is drawn from its latest thousand sessions.
    for (let page = 0; page < 10; page++) {
      const res = await apiClient(session).usage.sessions({
        from,
        limit: 100,
        ...(filter ? { endUserId: filter } : {}),
        ...(cursor ? { cursor } : {}),
      });
      all.push(...res.data);
      if (!res.nextCursor) break;
      cursor = res.nextCursor;
    }
    return all;
  }

  useEffect(
    () =>
      void run(async () => {
        const client = apiClient(session);
        const [b, all] = await Promise.all([client.credits.balance(), sessions('')]);
        setBalance(b);
        setChartRows(all);
        setRows(all);
      }),
    [],
  );

  function filter(e: FormEvent) {
    e.preventDefault();
    void run(async () => setRows(await sessions(endUserId.trim())));
  }

  return (
    <>
      <h1>Usage and billing</h1>
      <FormBanner error={error} fields={[]} />
      {balance && <Balance balance={balance} />}
      <section className="card">
        <h2>Credits used per day (last {DAYS} days)</h2>
        <UsageChart rows={chartRows} />
      </section>
      <section className="card">
        <h2>Sessions</h2>
        <form className="inline" onSubmit={filter}>
          <label>
            End user{' '}
            <input
              name="endUserId"
              value={endUserId}
              onChange={(e) => setEndUserId(e.target.value)}
              placeholder="client_metadata.user_id"
            />
          </label>
          <button type="submit">Filter</button>
        </form>
        <SessionsTable rows={rows} />
        {rows.length === 0 && <p className="muted">No sessions in this window.</p>}
      </section>
      <Recordings session={session} />
    </>
  );
}
