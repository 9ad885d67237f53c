-- Assets reachable beyond the newest 100: GET /assets pages by (created_at, id), and DELETE /assets/{id}.
--
-- created_at to the millisecond: the paging cursor carries a JavaScript Date (milliseconds), and a
-- microsecond part would make `(created_at, id) < cursor` skip rows of the cursor's millisecond.
-- The column type rounds every write, the defaults and tests' own inserts included.
alter table assets alter column created_at type timestamptz(3);

-- Soft delete, like avatars: the row stays (avatars, their source reviews and retired clips may still
-- name the id) while every read treats it as gone; the bytes are removed from storage.
alter table assets add column deleted_at timestamptz;

-- The list's keyset order over live rows.
drop index assets_tenant;
create index assets_tenant_live on assets (tenant_id, created_at desc, id desc) where deleted_at is null;

-- What DELETE checks before it deletes: live avatars whose portrait it is, live clips whose source it is.
create index avatars_source_asset on avatars (source_asset_id) where deleted_at is null;
create index avatar_clips_upload_asset on avatar_clips (upload_asset_id) where upload_asset_id is not null and retired_at is null;
