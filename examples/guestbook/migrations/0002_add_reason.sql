-- Migration number: 0002
-- Why an entry was held back; and an index for the public list.
ALTER TABLE entries ADD COLUMN reason TEXT;
CREATE INDEX entries_by_status ON entries (status, id);
