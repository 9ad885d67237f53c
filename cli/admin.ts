import os from 'node:os';
import { parseArgs } from 'node:util';
import { SCOPES, type Scope } from '../core/auth/keys.ts';
import { ConfigError, loadConfig } from '../core/platform/config.ts';
import { MICROS_PER_SECOND } from '../core/credits/ledger.ts';
import { createLogger } from '../core/platform/log.ts';
import { onShutdown } from '../core/platform/process.ts';
import { createServices, type Services } from '../core/wiring/services.ts';
import { POOL_NAME } from '../core/live/capacity.ts';
import type { TenantLimits, TenantSwitch } from '../core/tenants.ts';
import { DASHBOARD_ROLES, type DashboardRole } from '../core/dashboard/auth.ts';

/**
 * Operator commands, against the same database the server uses (DATABASE_URL, or the embedded
 * PostgreSQL in DATA_DIR, started for the command if the server is not running).
 *
 *   npm run --silent admin -- tenant create --name NAME --credits SECONDS --json
 */
const USAGE = `Usage: npm run --silent admin -- <command> [options]

  tenant create --name NAME [--credits SECONDS] [--json]   create a workspace and a key with scope "*"
  tenant list [--json]
  tenant suspend TENANT_ID
  tenant reactivate TENANT_ID
  tenant switch TENANT_ID (scene-sessions|clip-library|recordings|connection-history) (on|off)
  tenant limit TENANT_ID [--max-concurrent-sessions N] [--max-concurrent-scene-sessions N] [--recording-retention-days DAYS]
                                                      live calls at once (default 5), scene calls at once (default 2), days recordings are kept (default 30)
  pool set NAME --slots N                             a capacity pool's slots (calls at once), overriding its workers' count
  pool unset NAME                                     back to the slots its live agent workers declare
  pool list [--json]
  credits grant TENANT_ID --seconds SECONDS [--json]
  credits balance TENANT_ID [--json]
  key create TENANT_ID --name NAME [--scopes a,b] [--spend-limit MICROS] [--legacy live|test] [--json]
  key list TENANT_ID [--json]
  key revoke KEY_ID [--json]                           also revokes every key minted under it (POST /api-keys)
  dashboard link --tenant TENANT_ID --email EMAIL --role owner|admin|member [--json]
                                                      a one-time sign-in link to the dashboard (valid DASHBOARD_LINK_MINUTES)
`;

class UsageError extends Error {}

/** `tenant switch` names and the workspace switch each flips. */
const SWITCHES: Record<string, TenantSwitch> = {
  'scene-sessions': 'scene_sessions',
  'clip-library': 'clip_library',
  recordings: 'recordings',
  'connection-history': 'connection_history',
};

/** The flags of `tenant limit`: the limit each sets and its bounds. */
const LIMIT_FLAGS: Record<string, { field: keyof TenantLimits; min: number; max: number }> = {
  'max-concurrent-sessions': { field: 'maxConcurrentSessions', min: 0, max: 1_000_000 },
  'max-concurrent-scene-sessions': { field: 'maxConcurrentSceneSessions', min: 0, max: 1_000_000 },
  'recording-retention-days': { field: 'recordingRetentionDays', min: 1, max: 3650 },
};

function secondsToMicros(v: string | undefined, flag: string): number {
  const n = Number(v);
  if (v === undefined || v.trim() === '' || !Number.isFinite(n) || n < 0)
    throw new UsageError(`${flag} must be a number of seconds >= 0`);
  return Math.round(n * MICROS_PER_SECOND);
}

function intFlag(v: string, flag: string, min: number, max: number): number {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < min || n > max)
    throw new UsageError(`${flag} must be an integer from ${min} to ${max}`);
  return n;
}

function need<T>(v: T | undefined, what: string): T {
  if (v === undefined || v === '') throw new UsageError(`missing ${what}`);
  return v;
}

const print = (json: boolean, value: unknown, text: string) => console.log(json ? JSON.stringify(value) : text);

async function run(s: Services, argv: string[]): Promise<void> {
  const { values: o, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      credits: { type: 'string' },
      seconds: { type: 'string' },
      scopes: { type: 'string' },
      'spend-limit': { type: 'string' },
      legacy: { type: 'string' },
      slots: { type: 'string' },
      tenant: { type: 'string' },
      email: { type: 'string' },
      role: { type: 'string' },
      ...Object.fromEntries(Object.keys(LIMIT_FLAGS).map((flag) => [flag, { type: 'string' as const }])),
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [area, verb, ...rest] = positionals;
  const json = o.json ?? false;
  const cmd = `${area ?? ''} ${verb ?? ''}`;

  switch (cmd) {
    case 'tenant create': {
      const name = need(o.name, '--name');
      const micros = o.credits === undefined ? 0 : secondsToMicros(o.credits, '--credits');
      const tenant = await s.tenants.create(name);
      if (micros > 0) await s.ledger.grant(tenant.id, micros, 'initial grant');
      const { apiKey } = await s.keys.create({ tenantId: tenant.id, name: 'admin', scopes: ['*'] });
      print(json, { tenantId: tenant.id, apiKey }, `tenant ${tenant.id}\napi key ${apiKey}`);
      return;
    }
    case 'tenant list': {
      const tenants = await s.tenants.list();
      print(json, tenants, tenants.map((t) => `${t.id}\t${t.status}\t${t.name}`).join('\n'));
      return;
    }
    case 'tenant suspend':
    case 'tenant reactivate': {
      const t = await s.tenants.setStatus(need(rest[0], 'TENANT_ID'), verb === 'suspend' ? 'suspended' : 'active');
      if (!t) throw new UsageError(`no tenant ${rest[0]}`);
      print(json, t, `${t.id} ${t.status}`);
      return;
    }
    case 'tenant switch': {
      const [id, which, state] = rest;
      const sw = SWITCHES[need(which, 'switch name')];
      if (!sw) throw new UsageError(`switch must be one of ${Object.keys(SWITCHES).join(', ')}`);
      if (state !== 'on' && state !== 'off') throw new UsageError('state must be on or off');
      const t = await s.tenants.setSwitch(need(id, 'TENANT_ID'), sw, state === 'on');
      if (!t) throw new UsageError(`no tenant ${id}`);
      print(json, t, `${t.id} ${which} ${state}`);
      return;
    }
    case 'tenant limit': {
      const id = need(rest[0], 'TENANT_ID');
      const limits: TenantLimits = {};
      const set: string[] = [];
      for (const [flag, { field, min, max }] of Object.entries(LIMIT_FLAGS)) {
        const v = o[flag as keyof typeof o];
        if (typeof v !== 'string') continue;
        limits[field] = intFlag(v, `--${flag}`, min, max);
        set.push(`${flag} ${limits[field]}`);
      }
      if (set.length === 0)
        throw new UsageError(
          `tenant limit needs one of ${Object.keys(LIMIT_FLAGS)
            .map((f) => `--${f}`)
            .join(', ')}`,
        );
      const t = await s.tenants.setLimits(id, limits);
      if (!t) throw new UsageError(`no tenant ${id}`);
      print(json, t, `${t.id} ${set.join(' ')}`);
      return;
    }
    case 'pool set':
    case 'pool unset': {
      const name = need(rest[0], 'NAME');
      if (!POOL_NAME.test(name))
        throw new UsageError('NAME must be 1 to 64 lowercase letters, digits, _ or -, starting with a letter or digit');
      const slots = verb === 'set' ? intFlag(need(o.slots, '--slots'), '--slots', 0, 1_000_000) : null;
      await s.capacity.setPoolSlots(name, slots);
      print(
        json,
        { name, slots },
        slots === null ? `${name} slots: declared by its workers` : `${name} slots ${slots}`,
      );
      return;
    }
    case 'pool list': {
      const pools = [...(await s.capacity.pools())].map(([name, p]) => ({
        name,
        slots: p.slots,
        source: p.configured ? 'configured' : 'workers',
        workers: p.workers,
      }));
      print(json, pools, pools.map((p) => `${p.name}\t${p.slots}\t${p.source}\t${p.workers} workers`).join('\n'));
      return;
    }
    case 'credits grant': {
      const b = await s.ledger.grant(
        need(rest[0], 'TENANT_ID'),
        secondsToMicros(o.seconds, '--seconds'),
        'operator grant',
      );
      print(json, b, `${b.tenantId} balance ${b.balanceCreditMicros} credit micros`);
      return;
    }
    case 'credits balance': {
      const b = await s.ledger.balance(need(rest[0], 'TENANT_ID'));
      print(json, b, `${b.tenantId} balance ${b.balanceCreditMicros} reserved ${b.reservedCreditMicros} credit micros`);
      return;
    }
    case 'key create': {
      const tenantId = need(rest[0], 'TENANT_ID');
      const scopes = (o.scopes ? o.scopes.split(',').map((x) => x.trim()) : ['*']) as Scope[];
      const bad = scopes.find((x) => !(SCOPES as readonly string[]).includes(x));
      if (bad) throw new UsageError(`unknown scope ${bad}; scopes are ${SCOPES.join(', ')}`);
      if (o.legacy && o.legacy !== 'live' && o.legacy !== 'test') throw new UsageError('--legacy must be live or test');
      const limit = o['spend-limit'] === undefined ? null : Number(o['spend-limit']);
      if (limit !== null && (!Number.isSafeInteger(limit) || limit < 0))
        throw new UsageError('--spend-limit must be an integer >= 0');
      if (!(await s.tenants.get(tenantId))) throw new UsageError(`no tenant ${tenantId}`);
      const { record, apiKey } = await s.keys.create({
        tenantId,
        name: need(o.name, '--name'),
        scopes,
        spendLimitCreditMicros: limit,
        legacyEnvironment: o.legacy as 'live' | 'test' | undefined,
      });
      print(json, { id: record.id, apiKey }, `${record.id}\n${apiKey}`);
      return;
    }
    case 'key list': {
      const keys = await s.keys.list(need(rest[0], 'TENANT_ID'));
      print(
        json,
        keys,
        keys.map((k) => `${k.id}\t${k.status}\t${k.redactedKey}\t${k.scopes.join(',')}\t${k.name}`).join('\n'),
      );
      return;
    }
    case 'key revoke': {
      const k = await s.keys.revoke(need(rest[0], 'KEY_ID'));
      if (!k) throw new UsageError(`no key ${rest[0]}`);
      const also = k.revokedDescendants > 0 ? ` with ${k.revokedDescendants} key(s) minted under it` : '';
      print(json, { id: k.id, status: k.status, revokedDescendants: k.revokedDescendants }, `${k.id} revoked${also}`);
      return;
    }
    case 'dashboard link': {
      const tenantId = need(o.tenant, '--tenant');
      const email = need(o.email, '--email').trim();
      if (!/^[^\s@]+@[^\s@]+$/.test(email) || email.length > 254)
        throw new UsageError('--email must be an email address');
      const role = need(o.role, '--role');
      if (!(DASHBOARD_ROLES as readonly string[]).includes(role))
        throw new UsageError(`--role must be one of ${DASHBOARD_ROLES.join(', ')}`);
      if (!(await s.tenants.get(tenantId))) throw new UsageError(`no tenant ${tenantId}`);
      const { token, expiresAt } = await s.dashboard.createLink({ tenantId, email, role: role as DashboardRole });
      // The token rides in the fragment: browsers never send it to a server, so it is in no access log.
      const url = `${s.config.publicBaseUrl}/platform/signin#token=${token}`;
      print(json, { url, expiresAt: expiresAt.toISOString() }, url);
      return;
    }
    default:
      if (o.help) {
        console.log(USAGE);
        return;
      }
      throw new UsageError(area ? `unknown command "${cmd.trim()}"` : 'no command');
  }
}

async function main() {
  const argv = process.argv.slice(2);
  // No logs: stdout stays one parsable line.
  const log = createLogger('silent');
  let opening: Promise<Services> | undefined;
  let services: Services | undefined;
  let code = 0;
  // Interrupted (Ctrl-C, kill): close what is open, which stops a cluster this command started,
  // and exit 128 + the signal's number, as shells expect of an interrupted command.
  const shutdown = onShutdown(log, async () => (await opening?.catch(() => undefined))?.close(), {
    exitCode: (signal) => 128 + os.constants.signals[signal],
  });
  try {
    const config = loadConfig();
    opening = createServices(config, { log });
    services = await opening;
    await run(services, argv);
  } catch (err) {
    // Interrupted: the command's failure is the interruption's doing, and the shutdown exits.
    if (shutdown.stopping) return;
    if (err instanceof UsageError || err instanceof ConfigError || (err instanceof TypeError && 'code' in err)) {
      console.error(`admin: ${err.message}\n\n${USAGE}`);
      code = 2;
    } else {
      console.error(`admin: ${err instanceof Error ? err.message : String(err)}`);
      code = 1;
    }
  } finally {
    await services?.close();
  }
  if (!shutdown.stopping) process.exit(code);
}

await main();
