-- Tenants (workspaces), API keys, the credit ledger, session usage and idempotency records.
-- Amounts are credit micros (1 realtime second = 1,000,000) in bigint.

create table tenants (
  id                      text primary key,
  name                    text not null,
  status                  text not null default 'active' check (status in ('active', 'suspended')),
  scene_sessions_enabled  boolean not null default false,
  clip_library_enabled    boolean not null default true,
  max_concurrent_sessions integer not null default 5 check (max_concurrent_sessions >= 0),
  created_at              timestamptz not null default now(),
  updated_at              timestamptz not null default now()
);

create table api_keys (
  id                        text primary key,           -- svc_<keyId>
  key_id                    text not null unique,        -- the <keyId> segment of svc_<keyId>_<secret>
  tenant_id                 text not null references tenants (id),
  name                      text not null,
  -- SHA-256 of the secret segment (new keys) or of the whole key (legacy svc_live_/svc_test_ keys).
  secret_hash               bytea not null,
  legacy                    boolean not null default false,
  redacted_key              text not null,
  scopes                    text[] not null,
  status                    text not null default 'active' check (status in ('active', 'revoked')),
  spend_limit_credit_micros bigint check (spend_limit_credit_micros >= 0),
  spent_credit_micros       bigint not null default 0 check (spent_credit_micros >= 0),
  reserved_credit_micros    bigint not null default 0 check (reserved_credit_micros >= 0),
  created_at                timestamptz not null default now(),
  expires_at                timestamptz,
  revoked_at                timestamptz
);
create index api_keys_tenant on api_keys (tenant_id, created_at desc);
create unique index api_keys_legacy_hash on api_keys (secret_hash) where legacy;

create table credit_wallets (
  tenant_id                text primary key references tenants (id),
  balance_credit_micros    bigint not null default 0 check (balance_credit_micros >= 0),
  reserved_credit_micros   bigint not null default 0 check (reserved_credit_micros >= 0),
  lifetime_granted_credit_micros bigint not null default 0,
  lifetime_used_credit_micros    bigint not null default 0,
  updated_at               timestamptz not null default now(),
  check (reserved_credit_micros <= balance_credit_micros)
);

-- Every change of a balance is a ledger row: the rows of a tenant sum to its balance.
create table credit_ledger (
  id             text primary key,
  tenant_id      text not null references tenants (id),
  kind           text not null check (kind in ('grant', 'usage')),
  amount_credit_micros bigint not null,
  reservation_id text,
  note           text,
  created_at     timestamptz not null default now()
);
create index credit_ledger_tenant on credit_ledger (tenant_id, created_at);

-- Credits held for work in progress. Open reservations of a tenant sum to its wallet's reserved.
create table credit_reservations (
  id                    text primary key,
  tenant_id             text not null references tenants (id),
  api_key_id            text references api_keys (id),
  purpose               text not null,
  amount_credit_micros  bigint not null check (amount_credit_micros > 0),
  -- Usage reported so far; what the janitor charges if the holder dies before settling.
  progress_credit_micros bigint not null default 0 check (progress_credit_micros >= 0),
  settled_credit_micros bigint check (settled_credit_micros >= 0),
  status                text not null default 'open' check (status in ('open', 'settled', 'expired')),
  expires_at            timestamptz not null,
  created_at            timestamptz not null default now(),
  settled_at            timestamptz,
  check (settled_credit_micros is null or settled_credit_micros <= amount_credit_micros)
);
create index credit_reservations_open on credit_reservations (expires_at) where status = 'open';
create index credit_reservations_tenant on credit_reservations (tenant_id) where status = 'open';

-- One row per billable session (turn, live call, lipsync render, generation).
create table session_usage (
  id                   text primary key,
  tenant_id            text not null references tenants (id),
  api_key_id           text references api_keys (id),
  kind                 text not null check (kind in ('turn', 'live', 'lipsync', 'generation')),
  avatar_id            text,
  end_user_id          text,
  status               text not null check (status in ('reserved', 'started', 'released', 'failed')),
  reservation_id       text references credit_reservations (id),
  started_at           timestamptz,
  ended_at             timestamptz,
  billable_ms          bigint not null default 0 check (billable_ms >= 0),
  billed_credit_micros bigint not null default 0 check (billed_credit_micros >= 0),
  created_at           timestamptz not null default now(),
  updated_at           timestamptz not null default now()
);
create index session_usage_window on session_usage (tenant_id, created_at desc, id desc);
create index session_usage_end_user on session_usage (tenant_id, end_user_id, created_at desc, id desc);

-- Stored answers of requests that carried an Idempotency-Key.
create table idempotency_keys (
  tenant_id       text not null,
  scope           text not null,
  key             text not null,
  request_hash    text not null,
  state           text not null check (state in ('in_flight', 'done')),
  response_status integer,
  response_body   jsonb,
  locked_until    timestamptz not null,
  created_at      timestamptz not null default now(),
  expires_at      timestamptz not null,
  primary key (tenant_id, scope, key)
);
create index idempotency_keys_expiry on idempotency_keys (expires_at);

-- API processes cache verified keys; any change to a key or a tenant tells them to drop it.
create function notify_auth_changed() returns trigger language plpgsql as $$
begin
  perform pg_notify('auth_changed', tg_table_name || ':' || coalesce(new.id, old.id));
  return null;
end $$;
create trigger api_keys_auth_changed after update or delete on api_keys
  for each row execute function notify_auth_changed();
create trigger tenants_auth_changed after update or delete on tenants
  for each row execute function notify_auth_changed();
