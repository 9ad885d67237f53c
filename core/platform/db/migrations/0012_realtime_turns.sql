-- Realtime turns: the conversation history of talk turns, and an avatar's frame caches at the
-- settings the realtime paths ask for (POST /realtime/video-cache/plan).

-- One conversation of a workspace with one avatar (its id is chosen by the client). Bounded: the
-- last messages only (core/realtime/conversations.ts), and gone once expired.
create table realtime_conversations (
  tenant_id       text not null references tenants (id),
  avatar_id       text not null references avatars (id),
  conversation_id text not null check (conversation_id ~ '^[A-Za-z0-9_-]{1,64}$'),
  -- [{ "role": "user" | "assistant", "content": "..." }], oldest first
  messages        jsonb not null default '[]'::jsonb,
  updated_at      timestamptz not null default now(),
  expires_at      timestamptz not null,
  primary key (tenant_id, avatar_id, conversation_id)
);
create index realtime_conversations_expiry on realtime_conversations (tenant_id, expires_at);

-- A clip's frame cache at given settings. `native` rows are the cache the clip was generated with
-- (cache_key = source_key); the others are transcodes of it, made by the `video-cache-transcode` job.
-- A clip whose source cache changes (a new loop, a re-rendered clip) gets new rows; the old ones go.
create table video_cache_entries (
  id          text primary key,                       -- vc_...
  tenant_id   text not null references tenants (id),
  avatar_id   text not null references avatars (id),
  clip_id     text not null,                          -- 'source': the idle loop
  source_key  text not null,                          -- storage prefix of the cache it is made from
  fps         integer not null check (fps > 0),
  width       integer not null check (width > 0),
  height      integer not null check (height > 0),
  quality     integer not null check (quality between 1 and 100),
  native      boolean not null default false,
  status      text not null check (status in ('queued', 'rendering', 'ready', 'failed')),
  cache_key   text,                                   -- storage prefix of this entry's cache, once ready
  frames      integer,
  bytes       bigint,
  digest      text,                                   -- sha256 of frames.bin then landmarks.f32 (the manifest's hash)
  error       text,
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now(),
  unique (avatar_id, clip_id, source_key, fps, width, height, quality)
);
create index video_cache_entries_avatar on video_cache_entries (avatar_id, clip_id);
