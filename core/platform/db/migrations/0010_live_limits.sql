-- Live calls: concurrent calls playing a scene are limited per workspace (2 unless an operator
-- raises it with `npm run admin -- tenant limit TENANT_ID --max-concurrent-scene-sessions N`).
alter table tenants
  add column max_concurrent_scene_sessions integer not null default 2 check (max_concurrent_scene_sessions >= 0);
