-- Live calls on LiveKit: sessions and their lifecycle, the agent workers that serve them, capacity
-- pools, connection history, scenes (tenant clips used as a call's picture) and recordings.

-- Workspace policies of live calls (set with the admin CLI).
alter table tenants
  add column connection_history_enabled boolean not null default true,
  add column recordings_enabled         boolean not null default false,
  add column recording_retention_days   integer not null default 30
    check (recording_retention_days between 1 and 3650);

-- Capacity pools with an operator-configured slot count. A pool without a row here admits as many
-- calls as its live agent workers declare.
create table capacity_pools (
  name       text primary key check (name ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
  slots      integer not null check (slots >= 0),
  updated_at timestamptz not null default now()
);

-- Agent worker processes (`npm run agent`): what each declares it can serve, and when it last said so.
create table agent_workers (
  id            text primary key,                 -- wrk_...
  capacity_pool text not null,
  slots         integer not null check (slots >= 0),
  draining      boolean not null default false,
  hostname      text,
  started_at    timestamptz not null default now(),
  last_seen_at  timestamptz not null default now()
);
create index agent_workers_pool on agent_workers (capacity_pool, last_seen_at);

-- One row per minted live call; its billing lives in the session_usage row of the same id.
create table live_sessions (
  id                   text primary key references session_usage (id),  -- ses_...
  tenant_id            text not null references tenants (id),
  api_key_id           text references api_keys (id),
  avatar_id            text not null references avatars (id),
  capacity_pool        text not null,
  -- conversation: our worker talks (STT, LLM, TTS); provider: it speaks for another agent in an existing room.
  mode                 text not null check (mode in ('conversation', 'provider')),
  room_name            text not null,
  user_identity        text,                                             -- null in provider mode
  avatar_identity      text not null,
  agent_identity       text,                                             -- provider mode: the agent spoken for
  scene_id             text,
  video_cache_id       text,
  record               boolean not null default false,
  max_duration_seconds integer not null check (max_duration_seconds > 0),
  -- pending: minted, waiting for the worker; connecting: the avatar is in the room, the user is not yet;
  -- active: both are present (billing runs); ended: settled, whatever the reason.
  state                text not null check (state in ('pending', 'connecting', 'active', 'ended')),
  end_reason           text,
  worker_id            text,
  created_at           timestamptz not null default now(),
  joined_at            timestamptz,
  started_at           timestamptz,
  ended_at             timestamptz,
  last_heartbeat_at    timestamptz,
  updated_at           timestamptz not null default now()
);
create index live_sessions_tenant_live on live_sessions (tenant_id) where state <> 'ended';
create index live_sessions_pool_live on live_sessions (capacity_pool) where state <> 'ended';
create index live_sessions_room on live_sessions (room_name);

-- Connection history: observations of a session's participants, from LiveKit webhooks and the worker.
create table connection_events (
  id                   bigserial primary key,
  tenant_id            text not null references tenants (id),
  session_id           text not null references live_sessions (id),
  participant_identity text not null,
  role                 text not null check (role in ('user', 'avatar', 'agent', 'other')),
  kind                 text not null check (kind in ('joined', 'left', 'reconnected', 'track_published', 'track_unpublished')),
  track_kind           text check (track_kind in ('audio', 'video')),
  track_source         text,
  source               text not null check (source in ('webhook', 'worker')),
  -- LiveKit's webhook event id: a redelivered webhook is recorded once.
  event_id             text unique,
  occurred_at          timestamptz not null,
  created_at           timestamptz not null default now()
);
create index connection_events_session on connection_events (tenant_id, session_id, occurred_at, id);

-- Scenes: a tenant's clip prepared as a call's picture. The id derives from the clip's bytes.
create table scenes (
  tenant_id        text not null references tenants (id),
  id               text not null,                                      -- scn_...
  status           text not null check (status in ('building', 'ready', 'failed')),
  error            text check (error in ('source_unreachable', 'source_unusable', 'source_mismatch', 'build_failed')),
  error_message    text,
  profile          text not null,
  continuation     text,
  source_url       text not null,
  source_md5       text,
  source_bytes     bigint,
  video_cache_id   text,                                               -- vc_..., set once ready
  cache_key        text,                                               -- frame cache prefix in storage
  frame_count      integer,
  fps              double precision,
  width            integer,
  height           integer,
  duration_seconds double precision,
  created_at       timestamptz not null default now(),
  updated_at       timestamptz not null default now(),
  ready_at         timestamptz,
  expires_at       timestamptz not null,
  primary key (tenant_id, id)
);
create unique index scenes_video_cache on scenes (tenant_id, video_cache_id) where video_cache_id is not null;
create index scenes_expiry on scenes (expires_at);

-- Recordings of calls, written by the worker; media deleted once retention passes.
create table recordings (
  id                   text primary key,                               -- rec_...
  tenant_id            text not null references tenants (id),
  session_id           text not null references live_sessions (id),
  status               text not null check (status in ('processing', 'ready', 'failed')),
  error                text,
  storage_key          text not null,
  content_type         text not null default 'video/mp4',
  duration_seconds     double precision,
  size_bytes           bigint check (size_bytes >= 0),
  created_at           timestamptz not null default date_trunc('milliseconds', now()),
  updated_at           timestamptz not null default now(),
  ready_at             timestamptz,
  retention_expires_at timestamptz not null,
  media_deleted_at     timestamptz
);
create index recordings_tenant on recordings (tenant_id, created_at desc, id desc);
create index recordings_session on recordings (session_id);
create index recordings_retention on recordings (retention_expires_at) where media_deleted_at is null;

-- Every process holding capacity slots hears when a call ends, whoever ended it (the API, the
-- worker, the janitor): payload "<capacity_pool>:<session id>".
create function notify_live_session_ended() returns trigger language plpgsql as $$
begin
  if new.state = 'ended' and old.state <> 'ended' then
    perform pg_notify('live_session_ended', new.capacity_pool || ':' || new.id);
  end if;
  return null;
end $$;
create trigger live_sessions_ended after update of state on live_sessions
  for each row execute function notify_live_session_ended();
