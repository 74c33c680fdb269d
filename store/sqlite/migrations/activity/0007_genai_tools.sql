-- The tools a GenAI record's request offered (the record's
-- ToolDefinitions), a tree of parts like its message arrays, so a session
-- that offers the same tools on every call stores them once. NULL in
-- records stored before: their tools are only in the raw upload.
ALTER TABLE genai ADD COLUMN tools_part INTEGER;
