-- Media assets (portraits, clip videos, audio) and avatars with their background generation state.

create table assets (
  id                text primary key,                -- ast_...
  tenant_id         text not null references tenants (id),
  kind              text not null check (kind in ('image', 'video', 'audio')),
  -- pending_upload while bytes stream in (remote fetches), ready once stored and verified, failed otherwise.
  status            text not null check (status in ('pending_upload', 'ready', 'failed')),
  content_type      text,
  size_bytes        bigint check (size_bytes >= 0),
  sha256            text,
  storage_key       text,                            -- key in the object store
  original_filename text,
  source_url        text,                            -- for POST /assets/remote
  metadata          jsonb not null default '{}'::jsonb,
  error             text,
  created_at        timestamptz not null default now(),
  updated_at        timestamptz not null default now()
);
create index assets_tenant on assets (tenant_id, created_at desc);

create table avatars (
  id                 text primary key,               -- ava_...
  tenant_id          text not null references tenants (id),
  display_name       text not null,
  source_kind        text not null default 'image' check (source_kind in ('image', 'video')),
  model_id           text not null default 'builtin-rig-v1',
  source_asset_id    text references assets (id),
  motion_prompt      text,
  status             text not null check (status in ('draft', 'preprocessing', 'ready', 'failed', 'disabled', 'deleted')),
  idle_video_status  text not null default 'none' check (idle_video_status in ('none', 'queued', 'generating', 'ready', 'failed')),
  error              text,
  default_voice_id   text,
  voice              jsonb,
  llm                jsonb,
  settings           jsonb not null default '{}'::jsonb,
  metadata           jsonb not null default '{}'::jsonb,
  -- Profile text (limits in UTF-16 code units: personality 4,000, background 8,000, art direction 2,500, reply style 1,000).
  personality        text,
  background         text,
  art_direction      text,
  reply_style        text,
  anchor_time_ms     integer,
  -- The loop that serves now (its MP4 key and frame cache key); a re-direction renders beside it and swaps at once.
  serving_loop_key   text,
  serving_cache_key  text,
  loop_render_pending boolean not null default false,
  cache_manifest_id  text,
  cache_version      integer not null default 0,
  deleted_at         timestamptz,
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now()
);
create index avatars_tenant on avatars (tenant_id, updated_at desc) where deleted_at is null;

-- Audit of source checks on a portrait swap (the checks run even when a person's review lets the swap pass).
create table avatar_source_reviews (
  id             bigserial primary key,
  avatar_id      text not null references avatars (id),
  asset_id       text not null references assets (id),
  machine_verdict jsonb not null,
  review_reason  text,
  accepted       boolean not null,
  created_at     timestamptz not null default now()
);
