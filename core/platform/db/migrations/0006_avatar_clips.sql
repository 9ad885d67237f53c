-- The motion library of an avatar (its clip library): one row per clip. First the default clips
-- generated after the first idle loop publishes (core/avatars/clips.ts); the clip-library
-- declaration (PUT /avatars/{id}/clips: uploads, prompts of the tenant's own) builds on the same rows.
--
-- `status` is the progress of the clip's latest job; `mp4_key`/`cache_key` are the outputs that
-- SERVE now and stay set while a replacement renders or after it failed (like avatars.serving_loop_key).
-- `generation_id` names the render that produced the serving outputs (their storage prefix
-- tenants/<t>/avatars/<a>/clips/<clipId>/<generationId>/).
create table avatar_clips (
  avatar_id        text not null references avatars (id) on delete cascade,
  clip_id          text not null check (clip_id ~ '^[A-Za-z0-9_-]{1,64}$'),
  status           text not null check (status in ('queued', 'rendering', 'ready', 'failed')),
  source_kind      text not null check (source_kind in ('generated', 'upload')),
  motion_prompt    text,
  duration_seconds integer,
  upload_asset_id  text,
  mp4_key          text,
  cache_key        text,
  generation_id    text,
  anchor_version   integer not null default 1,
  pose_check       jsonb,
  error            text,
  is_default       boolean not null default false,
  retired_at       timestamptz,
  created_at       timestamptz not null default now(),
  updated_at       timestamptz not null default now(),
  primary key (avatar_id, clip_id)
);
create index avatar_clips_avatar on avatar_clips (avatar_id);
