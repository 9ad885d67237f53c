-- Background generation of an avatar's loop (core/avatars, core/jobs): the id of the generation now
-- queued or rendering. A job publishes its loop only while its id is still this one, so a superseded
-- or duplicate attempt (a retry racing an expired one) never overwrites a newer loop.
alter table avatars add column generation_id text;
