-- A workspace may limit its live-call grants to the web origins it names (empty: no limit). A mint
-- for such a workspace hands out a join token instead of the LiveKit token; the token is redeemed
-- once, from an allowed Origin, for the LiveKit token (docs/dashboard.md, "Allowed origins").
alter table tenants add column allowed_origins text[] not null default '{}';

-- Join tokens: stored only as their SHA-256 (a copy of the database joins no call), single use.
create table live_join_tokens (
  token_hash  bytea primary key,
  session_id  text not null references live_sessions (id),
  tenant_id   text not null references tenants (id),
  created_at  timestamptz not null default now(),
  expires_at  timestamptz not null,
  used_at     timestamptz
);
create index live_join_tokens_expiry on live_join_tokens (expires_at);
