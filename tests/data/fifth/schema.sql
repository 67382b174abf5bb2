-- The schema ctx-init-db creates in ~/.fifth/context.db (examples/context-manager/main.fs,
-- quivent/fifth @ 8fa91c8): note the extra level column, no foreign keys, and
-- summaries.source_ids as a comma-separated id list. The tests build databases with it.
CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY,role TEXT NOT NULL,content TEXT NOT NULL,tokens INTEGER DEFAULT 0,priority INTEGER DEFAULT 50,level INTEGER DEFAULT 3,created_at TEXT DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE IF NOT EXISTS summaries (id INTEGER PRIMARY KEY,level INTEGER NOT NULL,content TEXT NOT NULL,tokens INTEGER DEFAULT 0,source_ids TEXT,created_at TEXT DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE IF NOT EXISTS keywords (id INTEGER PRIMARY KEY,keyword TEXT NOT NULL,message_id INTEGER,summary_id INTEGER);
CREATE TABLE IF NOT EXISTS metrics (id INTEGER PRIMARY KEY,original_tokens INTEGER,compressed_tokens INTEGER,compression_ratio REAL,timestamp TEXT DEFAULT CURRENT_TIMESTAMP);
