-- The janitor sweeps open sessions whose reservation was closed; open sessions are few.
create index session_usage_open on session_usage (reservation_id) where status in ('reserved', 'started');
