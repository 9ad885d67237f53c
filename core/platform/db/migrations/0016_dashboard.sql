-- The dashboard (/platform/dashboard): no passwords. An operator prints a one-time sign-in link
-- (`admin dashboard link`); redeeming it opens a session held in an HttpOnly cookie. Both tokens are
-- stored only as their SHA-256, so a copy of the database signs no one in.
create table dashboard_sign_in_links (
  token_hash  bytea primary key,
  tenant_id   text not null references tenants (id),
  email       text not null,
  role        text not null check (role in ('owner', 'admin', 'member')),
  created_at  timestamptz not null default now(),
  expires_at  timestamptz not null,
  used_at     timestamptz
);
create index dashboard_sign_in_links_expiry on dashboard_sign_in_links (expires_at);

-- A signed-in browser. Its calls to /api/v1 act as `api_key_id`: a key minted for the session alone,
-- whose secret is never kept (it cannot be presented as a bearer), scoped by the role, expiring with
-- the session. `csrf_token` is the anti-forgery value every cookie-authenticated call must repeat in a header.
create table dashboard_sessions (
  id          text primary key,
  token_hash  bytea not null unique,
  csrf_token  text not null,
  tenant_id   text not null references tenants (id),
  email       text not null,
  role        text not null check (role in ('owner', 'admin', 'member')),
  api_key_id  text not null references api_keys (id),
  created_at  timestamptz not null default now(),
  expires_at  timestamptz not null
);
create index dashboard_sessions_expiry on dashboard_sessions (expires_at);

-- Keys created in the dashboard can be copied again by owners and admins while active and unexpired:
-- their full value is kept encrypted (AES-256-GCM, the key from DASHBOARD_SECRET_KEY), never in plain.
create table dashboard_key_secrets (
  api_key_id  text primary key references api_keys (id) on delete cascade,
  iv          bytea not null,
  ciphertext  bytea not null,
  tag         bytea not null,
  created_at  timestamptz not null default now()
);
