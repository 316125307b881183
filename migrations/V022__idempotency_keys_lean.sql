-- A submission with an `Idempotency-Key` writes a row of `idempotency_keys` in its insert
-- (V017). That row cost more than the key's entry in a unique index of `jobs` did before V017,
-- and keyed submissions lost more rate than any others (docs/scaling.md, issue 39 item 4).
-- Two of its costs go:
--
-- - The foreign key to `accounts`. Its check ran once per key and locked the account's row
--   FOR KEY SHARE; concurrent batches of one account share that lock through a multixact. As
--   on the partitioned tables (V017), rows are only ever written for an authenticated account.
-- - The key's collation. Keys are 1 to 255 printable ASCII characters, matched for equality
--   only; the "C" collation compares their bytes, which matches them as any deterministic
--   collation does, at less cost per comparison in the primary key.
--
-- Changing the collation rebuilds the primary key (24 hours of keys) under an exclusive lock:
-- submissions with keys wait for it. Run it with the fleet stopped (the `release` step).

ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_account_id_fkey;
ALTER TABLE idempotency_keys ALTER COLUMN key TYPE text COLLATE "C";
