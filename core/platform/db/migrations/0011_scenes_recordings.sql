-- Scenes and recordings: what the scene builder and the recording janitor need beyond 0009.

-- The build a scene row is on: a build job of an earlier build (before an expiry, a failure and a
-- new POST) finds another build_id and changes nothing. `source_key`: the clip's bytes staged in
-- storage by a POST that downloaded them itself (no md5 and bytes sent), deleted once the build ends.
-- `video_cache_id` (0009) is now set when a scene is posted (it derives from the content), so a
-- mint naming a scene still building finds it; the API shows it once the scene is ready.
alter table scenes
  add column build_id   text,
  add column source_key text;

-- The janitor's question: which recordings still say processing (their call may have ended long ago).
create index recordings_processing on recordings (session_id) where status = 'processing';
