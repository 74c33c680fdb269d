-- Exchanges carry their response id in a column of their own, set by the
-- writer: the expression index parsed every exchange's JSON, some tens of
-- kilobytes, on each insert.
DROP INDEX activity_exchange_response;
ALTER TABLE activity ADD COLUMN response_id TEXT;
UPDATE activity SET response_id = json_extract(data, '$.responseId')
	WHERE kind = 'llm_exchange' AND json_type(data, '$.responseId') = 'text' AND json_extract(data, '$.responseId') != '';
CREATE INDEX activity_response ON activity (member, response_id) WHERE response_id IS NOT NULL;
