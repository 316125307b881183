-- Job scores (contract 10): the score in [0, 1], to 3 decimals, of every category a built-in
-- model scored, as {"category": number}. NULL when no model ran (lists, hash banks, the
-- `openai` provider, failed jobs).
ALTER TABLE jobs ADD COLUMN scores jsonb;
