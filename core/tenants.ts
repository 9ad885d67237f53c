import type { Sql } from './platform/db/index.ts';
import { newId } from './platform/ids.ts';

export interface Tenant {
  id: string;
  name: string;
  status: 'active' | 'suspended';
  sceneSessionsEnabled: boolean;
  clipLibraryEnabled: boolean;
  maxConcurrentSessions: number;
  /** Calls may be recorded (a mint's `record`); off by default. */
  recordingsEnabled: boolean;
  /** Days a recording's media is kept (1 to 3650, default 30). */
  recordingRetentionDays: number;
  /** Live calls playing a scene at once (2 unless an operator raised it). */
  maxConcurrentSceneSessions: number;
  /** Whether connection observations of its calls are collected (on by default). */
  connectionHistoryEnabled: boolean;
  /** Web origins whose pages may join its live calls (empty: any page, the grant carries the LiveKit token). */
  allowedOrigins: string[];
  createdAt: Date;
}

export type TenantSwitch = 'scene_sessions' | 'clip_library' | 'recordings' | 'connection_history';

const SWITCH_COLUMN: Record<TenantSwitch, string> = {
  scene_sessions: 'scene_sessions_enabled',
  clip_library: 'clip_library_enabled',
  recordings: 'recordings_enabled',
  connection_history: 'connection_history_enabled',
};

/** Per-workspace limits an operator sets (the admin CLI's `tenant limit`). */
export interface TenantLimits {
  maxConcurrentSessions?: number;
  maxConcurrentSceneSessions?: number;
  recordingRetentionDays?: number;
}

const LIMIT_COLUMN: Record<keyof TenantLimits, string> = {
  maxConcurrentSessions: 'max_concurrent_sessions',
  maxConcurrentSceneSessions: 'max_concurrent_scene_sessions',
  recordingRetentionDays: 'recording_retention_days',
};

interface TenantRow {
  id: string;
  name: string;
  status: 'active' | 'suspended';
  scene_sessions_enabled: boolean;
  clip_library_enabled: boolean;
  max_concurrent_sessions: number;
  recordings_enabled: boolean;
  recording_retention_days: number;
  max_concurrent_scene_sessions: number;
  connection_history_enabled: boolean;
  allowed_origins: string[];
  created_at: Date;
}

const toTenant = (r: TenantRow): Tenant => ({
  id: r.id,
  name: r.name,
  status: r.status,
  sceneSessionsEnabled: r.scene_sessions_enabled,
  clipLibraryEnabled: r.clip_library_enabled,
  maxConcurrentSessions: r.max_concurrent_sessions,
  recordingsEnabled: r.recordings_enabled,
  recordingRetentionDays: r.recording_retention_days,
  maxConcurrentSceneSessions: r.max_concurrent_scene_sessions,
  connectionHistoryEnabled: r.connection_history_enabled,
  allowedOrigins: r.allowed_origins,
  createdAt: r.created_at,
});

/** Workspaces: created and switched by operators (the admin CLI), read by every request. */
export class TenantStore {
  constructor(private readonly sql: Sql) {}

  async create(name: string): Promise<Tenant> {
    const id = newId('tenant');
    const [row] = await this.sql.begin(async (tx) => {
      const rows = await tx<TenantRow[]>`insert into tenants (id, name) values (${id}, ${name}) returning *`;
      await tx`insert into credit_wallets (tenant_id) values (${id})`;
      return rows;
    });
    return toTenant(row!);
  }

  async get(id: string): Promise<Tenant | undefined> {
    const [row] = await this.sql<TenantRow[]>`select * from tenants where id = ${id}`;
    return row && toTenant(row);
  }

  async list(): Promise<Tenant[]> {
    return (await this.sql<TenantRow[]>`select * from tenants order by created_at`).map(toTenant);
  }

  async setStatus(id: string, status: Tenant['status']): Promise<Tenant | undefined> {
    const [row] = await this.sql<TenantRow[]>`
      update tenants set status = ${status}, updated_at = now() where id = ${id} returning *`;
    return row && toTenant(row);
  }

  async setSwitch(id: string, which: TenantSwitch, enabled: boolean): Promise<Tenant | undefined> {
    const [row] = await this.sql<TenantRow[]>`
      update tenants set ${this.sql(SWITCH_COLUMN[which])} = ${enabled}, updated_at = now()
      where id = ${id} returning *`;
    return row && toTenant(row);
  }

  /**
   * Sets the limits given (the others stay). A new recording retention applies to recordings begun
   * from now on; those already made keep the deadline they were given.
   */
  async setLimits(id: string, limits: TenantLimits): Promise<Tenant | undefined> {
    const set = Object.fromEntries(
      Object.entries(limits)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [LIMIT_COLUMN[k as keyof TenantLimits], v]),
    );
    if (Object.keys(set).length === 0) return this.get(id);
    const [row] = await this.sql<TenantRow[]>`
      update tenants set ${this.sql(set)}, updated_at = now() where id = ${id} returning *`;
    return row && toTenant(row);
  }

  /** Replaces the workspace's allowed origins (already checked: `originProblem`). */
  async setAllowedOrigins(id: string, origins: readonly string[]): Promise<Tenant | undefined> {
    const [row] = await this.sql<TenantRow[]>`
      update tenants set allowed_origins = ${this.sql.array([...origins])}, updated_at = now()
      where id = ${id} returning *`;
    return row && toTenant(row);
  }
}

/** At most this many allowed origins per workspace. */
export const MAX_ALLOWED_ORIGINS = 20;

/**
 * What is wrong with `s` as an allowed origin, or undefined: it must be exactly a web origin as a
 * browser sends it in `Origin` (http or https, lowercase, no path, query, trailing slash or wildcard).
 */
export function originProblem(s: string): string | undefined {
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    return 'is not a URL';
  }
  // URL accepts `*` in a host: no pattern is an origin a browser sends.
  if (s.includes('*')) return 'must not contain a wildcard: list each origin';
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http or https origin';
  if (url.origin !== s)
    return `must be exactly an origin (scheme://host[:port], lowercase, no path, query or trailing slash): ${url.origin}`;
  return undefined;
}
