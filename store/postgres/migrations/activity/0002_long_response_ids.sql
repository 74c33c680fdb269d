-- A response id is whatever an agent's OTLP export carries, unbounded: a
-- btree entry is limited to about 2.7 KB, a hash index keeps only a hash
-- of the value. Response ids are looked up by equality only, and are all
-- but unique, so the member is checked on the rows found.
DROP INDEX activity_response;
CREATE INDEX activity_response ON activity USING hash (response_id) WHERE response_id IS NOT NULL;
DROP INDEX genai_response;
CREATE INDEX genai_response ON genai USING hash (response_id) WHERE response_id != '';
