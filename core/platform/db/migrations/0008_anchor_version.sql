-- The avatar's clip anchor (its portrait): a portrait swap moves it, and every clip is re-rendered
-- or re-validated against the new one. Renders publish only for the anchor they were made for.
alter table avatars add column anchor_version integer not null default 1;
