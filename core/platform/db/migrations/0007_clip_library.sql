-- The clip library's declaration state on the avatar: `clip_revision` counts accepted
-- PUT /avatars/{id}/clips declarations (the optimistic-concurrency token, `expectedRevision`),
-- `clip_behavior` stores the declared behaviour (idle / on / actions, clips/behavior Behavior) or
-- null before the first declaration.
alter table avatars add column clip_revision integer not null default 0;
alter table avatars add column clip_behavior jsonb;
