-- Portraits registered on the fly by POST /lipsync (portraitUrl): the avatar made from each portrait,
-- by the SHA-256 of its bytes, so the same portrait is rigged and animated once per workspace.
create table lipsync_portraits (
  tenant_id  text not null references tenants (id),
  sha256     text not null check (sha256 ~ '^[0-9a-f]{64}$'),
  avatar_id  text not null references avatars (id),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, sha256)
);
