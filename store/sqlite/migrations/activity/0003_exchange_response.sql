-- Exchanges by response id: usage counts an inference record only when no
-- exchange carries its response, and traces join them by it.
CREATE INDEX activity_exchange_response ON activity (member, json_extract(data, '$.responseId')) WHERE kind = 'llm_exchange';
