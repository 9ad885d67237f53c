-- Keys that mint keys (POST /api-keys): each key records the key that minted it and the whole chain
-- above it, root first. The chain is fixed at mint time, so spend is charged to every ancestor and a
-- revocation reaches every descendant with one indexed lookup (`id = any(ancestor_ids)`), no recursion.
-- Keys that existed before this migration (and keys an operator mints with the admin CLI) are roots.
alter table api_keys
  add column parent_id    text references api_keys (id),
  add column ancestor_ids text[] not null default '{}';
alter table api_keys add constraint api_keys_lineage check (
  (parent_id is null and cardinality(ancestor_ids) = 0)
  or (parent_id is not null and ancestor_ids[cardinality(ancestor_ids)] = parent_id));
create index api_keys_ancestors on api_keys using gin (ancestor_ids);

-- A key's spent and reserved counters now move on every reservation and settlement of the key and of
-- each of its descendants. Those columns play no part in verifying a key, so updating them must not
-- drop every API process's key cache: notify only for the columns a verification reads.
drop trigger api_keys_auth_changed on api_keys;
create trigger api_keys_auth_changed
  after update of id, key_id, tenant_id, secret_hash, legacy, scopes, status, spend_limit_credit_micros,
                  expires_at, revoked_at, parent_id, ancestor_ids
  on api_keys for each row execute function notify_auth_changed();
create trigger api_keys_auth_deleted after delete on api_keys
  for each row execute function notify_auth_changed();
