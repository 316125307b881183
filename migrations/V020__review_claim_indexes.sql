-- A review claim (contract 14) takes the first claimable item of an account in queue order:
-- pending ones, and claimed ones whose claim ran out. It read them from
-- review_items_open_idx, which also holds every item claimed and not yet decided, so each claim
-- stepped over all the live claims before it (and the dead versions its neighbours' claims
-- left): with 2,000 items claimed, 2,000 rows removed by the filter and 1.6 ms a claim, and
-- `scripts/bench review`'s p99 over 20 ms. Now each kind has its own index: pending items in
-- queue order (an item leaves it when claimed), claimed items by when their claim runs out
-- (few of them have). review_items_open_idx stays for the queue's counts.
CREATE INDEX review_items_pending_idx ON review_items (account_id, (appeal_id IS NULL), id)
    WHERE state = 'pending';
CREATE INDEX review_items_expiring_idx ON review_items (account_id, claim_expires_at)
    WHERE state = 'claimed';
