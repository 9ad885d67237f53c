import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, watch } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../test/deps.ts';
import { testServices, waitFor } from '../test/helpers.ts';
import { startEntryPoint, stopLeftoverCluster } from '../test/processes.ts';

const s = await testServices();
const dataDirs: string[] = [];
afterAll(async () => {
  await s.close();
  for (const d of dataDirs) rmSync(d, { recursive: true, force: true });
});

function admin(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['run', '--silent', 'admin', '--', ...args], {
      env: { ...process.env, LOG_LEVEL: 'info', DATABASE_URL: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

const onTestDb = (args: string[]) => admin(args, { DATABASE_URL: s.dbUrl });

// Every step spawns npm and tsx: seconds each on a loaded machine, so the bound is generous.
describe('admin CLI', { timeout: 300_000 }, () => {
  it('tenant create --json prints exactly one JSON line with a "*" key and grants the credits', async () => {
    const r = await onTestDb(['tenant', 'create', '--name', 'Acme', '--credits', '120', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.endsWith('\n')).toBe(true);
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    const out = JSON.parse(r.stdout) as { tenantId: string; apiKey: string };
    expect(Object.keys(out)).toEqual(['tenantId', 'apiKey']);
    expect(out.apiKey).toMatch(/^svc_[0-9A-Za-z]{16}_[0-9A-Za-z]{43}$/);
    const principal = await s.keys.verify(`Bearer ${out.apiKey}`);
    expect(principal).toMatchObject({ tenantId: out.tenantId, scopes: ['*'] });
    expect((await s.ledger.balance(out.tenantId)).balanceCreditMicros).toBe(120_000_000);
  });

  it('grants credits, suspends and reactivates, flips switches, lists and revokes keys', async () => {
    const tenant = await s.tenants.create('ops');
    expect((await onTestDb(['credits', 'grant', tenant.id, '--seconds', '2.5'])).code).toBe(0);
    expect((await s.ledger.balance(tenant.id)).balanceCreditMicros).toBe(2_500_000);

    expect((await onTestDb(['tenant', 'suspend', tenant.id])).code).toBe(0);
    expect((await s.tenants.get(tenant.id))?.status).toBe('suspended');
    expect((await onTestDb(['tenant', 'reactivate', tenant.id])).code).toBe(0);
    expect((await s.tenants.get(tenant.id))?.status).toBe('active');

    expect((await onTestDb(['tenant', 'switch', tenant.id, 'scene-sessions', 'on'])).code).toBe(0);
    expect((await onTestDb(['tenant', 'switch', tenant.id, 'clip-library', 'off'])).code).toBe(0);
    expect(await s.tenants.get(tenant.id)).toMatchObject({ sceneSessionsEnabled: true, clipLibraryEnabled: false });

    const created = await onTestDb(['key', 'create', tenant.id, '--name', 'svc', '--scopes', 'credits:read', '--json']);
    const { id } = JSON.parse(created.stdout) as { id: string };
    const listed = JSON.parse((await onTestDb(['key', 'list', tenant.id, '--json'])).stdout) as {
      id: string;
      redactedKey: string;
    }[];
    expect(listed.map((k) => k.id)).toEqual([id]);
    expect(JSON.stringify(listed)).not.toMatch(/secret_hash|"apiKey"/);
    // Revoking a key revokes the keys minted under it (POST /api-keys records the minter).
    const child = await s.keys.create({ tenantId: tenant.id, name: 'minted', scopes: ['credits:read'], parentId: id });
    const revoked = await onTestDb(['key', 'revoke', id, '--json']);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(JSON.parse(revoked.stdout)).toEqual({ id, status: 'revoked', revokedDescendants: 1 });
    expect((await s.keys.list(tenant.id)).map((k) => [k.id, k.status]).sort()).toEqual(
      [
        [child.record.id, 'revoked'],
        [id, 'revoked'],
      ].sort(),
    );
    await expect(s.keys.verify(`Bearer ${child.apiKey}`)).rejects.toMatchObject({ code: 'unauthorized' });
  });

  it('switches recordings and sets the recording retention of a workspace; a bad value exits 2 and changes nothing', async () => {
    const tenant = await s.tenants.create('recorded');
    expect(await s.tenants.get(tenant.id)).toMatchObject({ recordingsEnabled: false, recordingRetentionDays: 30 });
    expect((await onTestDb(['tenant', 'switch', tenant.id, 'recordings', 'on'])).code).toBe(0);
    const limited = await onTestDb(['tenant', 'limit', tenant.id, '--recording-retention-days', '7']);
    expect(limited.code, limited.stderr).toBe(0);
    expect(limited.stdout.trim()).toBe(`${tenant.id} recording-retention-days 7`);
    expect(await s.tenants.get(tenant.id)).toMatchObject({ recordingsEnabled: true, recordingRetentionDays: 7 });
    for (const args of [
      ['tenant', 'limit', tenant.id, '--recording-retention-days', '0'],
      ['tenant', 'limit', tenant.id, '--recording-retention-days', 'ten'],
      ['tenant', 'limit', tenant.id],
      ['tenant', 'switch', tenant.id, 'recordings', 'maybe'],
    ]) {
      const r = await onTestDb(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain('Usage:');
    }
    expect((await onTestDb(['tenant', 'switch', tenant.id, 'recordings', 'off'])).code).toBe(0);
    expect(await s.tenants.get(tenant.id)).toMatchObject({ recordingsEnabled: false, recordingRetentionDays: 7 });
  });

  it('dashboard link --json prints one sign-in URL whose token signs in once; a bad role exits 2 and issues none', async () => {
    const tenant = await s.tenants.create('dash');
    const r = await onTestDb([
      'dashboard',
      'link',
      '--tenant',
      tenant.id,
      '--email',
      'ada@example.com',
      '--role',
      'admin',
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const { url } = JSON.parse(r.stdout) as { url: string };
    // The token rides in the fragment, which browsers never send to a server.
    expect(url).toMatch(/^http:\/\/localhost:8080\/platform\/signin#token=[\w-]{43}$/);
    const { session } = await s.dashboard.redeem(new URL(url).hash.slice('#token='.length));
    expect(session).toMatchObject({ tenantId: tenant.id, email: 'ada@example.com', role: 'admin' });

    const bad = await onTestDb([
      'dashboard',
      'link',
      '--tenant',
      tenant.id,
      '--email',
      'x@example.com',
      '--role',
      'root',
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--role must be one of owner, admin, member');
    expect((await s.sql`select 1 from dashboard_sign_in_links where email = 'x@example.com'`).length).toBe(0);
  });

  it('exits 2 with usage on a bad command or argument, writing nothing', async () => {
    const before = (await s.tenants.list()).length;
    for (const args of [
      ['tenant', 'create'],
      ['tenant', 'create', '--name', 'x', '--credits', 'lots'],
      ['frobnicate'],
    ]) {
      const r = await onTestDb(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain('Usage:');
      expect(r.stdout).toBe('');
    }
    expect((await s.tenants.list()).length).toBe(before);
  });

  it('live calls: tenant limit, connection-history switch, pool set/unset/list; bad values exit 2 writing nothing', async () => {
    const tenant = await s.tenants.create('live ops');
    expect(await s.tenants.get(tenant.id)).toMatchObject({
      maxConcurrentSessions: 5,
      maxConcurrentSceneSessions: 2,
      connectionHistoryEnabled: true,
    });
    const limited = await onTestDb([
      'tenant',
      'limit',
      tenant.id,
      '--max-concurrent-sessions',
      '12',
      '--max-concurrent-scene-sessions',
      '3',
      '--json',
    ]);
    expect(limited.code, limited.stderr).toBe(0);
    expect(JSON.parse(limited.stdout)).toMatchObject({
      id: tenant.id,
      maxConcurrentSessions: 12,
      maxConcurrentSceneSessions: 3,
    });
    expect((await onTestDb(['tenant', 'switch', tenant.id, 'connection-history', 'off'])).code).toBe(0);
    expect((await s.tenants.get(tenant.id))?.connectionHistoryEnabled).toBe(false);

    expect((await onTestDb(['pool', 'set', 'gpu-a', '--slots', '40'])).code).toBe(0);
    await s.agentWorkers.declare({ id: 'wrk_cli', capacityPool: 'cpu', slots: 4 });
    const listed = JSON.parse((await onTestDb(['pool', 'list', '--json'])).stdout) as unknown[];
    expect(listed).toEqual(
      expect.arrayContaining([
        { name: 'gpu-a', slots: 40, source: 'configured', workers: 0 },
        { name: 'cpu', slots: 4, source: 'workers', workers: 1 },
      ]),
    );
    expect((await onTestDb(['pool', 'unset', 'gpu-a'])).code).toBe(0);
    expect((await s.capacity.pools()).has('gpu-a')).toBe(false);

    for (const args of [
      ['tenant', 'limit', tenant.id],
      ['tenant', 'limit', tenant.id, '--max-concurrent-sessions', '-1'],
      ['tenant', 'switch', tenant.id, 'connection-history', 'maybe'],
      ['pool', 'set', 'Bad Name', '--slots', '3'],
      ['pool', 'set', 'gpu-b', '--slots', '2.5'],
    ]) {
      const r = await onTestDb(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain('Usage:');
    }
    expect(await s.tenants.get(tenant.id)).toMatchObject({
      maxConcurrentSessions: 12,
      connectionHistoryEnabled: false,
    });
    expect((await s.capacity.pools()).has('gpu-b')).toBe(false);
  });

  it('interrupted while it starts its own embedded PostgreSQL: stops that cluster and exits 130', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'avatar-cli-'));
    dataDirs.push(dataDir);
    // A first command creates the cluster (and stops it again).
    const first = await admin(['tenant', 'list', '--json'], { DATA_DIR: dataDir });
    expect(first.code, first.stderr).toBe(0);
    const clusterDir = path.join(dataDir, 'postgres');
    const pidFile = path.join(clusterDir, 'postmaster.pid');
    expect(existsSync(pidFile)).toBe(false);

    // The second one is interrupted the moment its cluster's server exists, while it still starts.
    const serverStarted = new Promise<void>((resolve) => {
      const watcher = watch(clusterDir, () => {
        if (!existsSync(pidFile)) return;
        watcher.close();
        resolve();
      });
    });
    const cli = startEntryPoint(
      'cli/admin.ts',
      { DATA_DIR: dataDir, DATABASE_URL: '' },
      { args: ['tenant', 'list', '--json'] },
    );
    try {
      await serverStarted;
      cli.child.kill('SIGINT');
      const { code } = await cli.exited;
      expect(code, cli.output()).toBe(130);
      expect(existsSync(pidFile), 'the cluster it started is stopped').toBe(false);
    } finally {
      cli.child.kill('SIGKILL');
      stopLeftoverCluster(dataDir);
    }
  });

  it('works on the embedded PostgreSQL in DATA_DIR with the server stopped and running, and data survives restarts', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'avatar-cli-'));
    dataDirs.push(dataDir);
    const env = { DATA_DIR: dataDir };
    const first = await admin(['tenant', 'create', '--name', 'one', '--credits', '1', '--json'], env);
    expect(first.code, first.stderr).toBe(0);

    const port = await freePort();
    const server: ChildProcess = spawn('npm', ['start'], {
      env: { ...process.env, DATABASE_URL: '', DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn' },
      stdio: 'ignore',
      detached: true,
    });
    try {
      const base = `http://127.0.0.1:${port}`;
      await waitFor('the server to serve /healthz', async () =>
        (await fetch(`${base}/healthz`).catch(() => undefined))?.status === 200 ? true : undefined,
      );
      // Created before the server started (cluster stopped and started again): still there.
      const { apiKey: oldKey } = JSON.parse(first.stdout) as { apiKey: string };
      expect(
        (await fetch(`${base}/api/v1/credits/balance`, { headers: { authorization: `Bearer ${oldKey}` } })).status,
      ).toBe(200);
      // Created while the server runs, on the same cluster: usable at once.
      const second = await admin(['tenant', 'create', '--name', 'two', '--credits', '3', '--json'], env);
      expect(second.code, second.stderr).toBe(0);
      const { apiKey } = JSON.parse(second.stdout) as { apiKey: string };
      const res = await fetch(`${base}/api/v1/credits/balance`, { headers: { authorization: `Bearer ${apiKey}` } });
      expect(res.status).toBe(200);
      // Over real HTTP the conventions are written on Node's response: check them there too.
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('x-request-id')).toMatch(/^req_/);
      const denied = await fetch(`${base}/api/v1/credits/balance`);
      expect(denied.status).toBe(401);
      expect(denied.headers.get('cache-control')).toBe('no-store');
      expect(((await denied.json()) as { requestId: string }).requestId).toBe(denied.headers.get('x-request-id'));
      expect(((await res.json()) as { balanceCreditMicros: number }).balanceCreditMicros).toBe(3_000_000);
    } finally {
      process.kill(-server.pid!, 'SIGTERM');
      await new Promise((r) => server.once('exit', r));
      stopLeftoverCluster(dataDir);
    }
  });
});
