-- A small context.db as main.fs leaves it: messages 2, 3 and 4 were compressed into summary 1
-- (their rows deleted); message 7 is tool output (level 4, low priority).
INSERT INTO messages (id, role, content, tokens, priority, level, created_at) VALUES
  (1, 'system', 'You are a careful coding agent. Never edit generated files.', 14, 100, 1, '2026-01-29 10:00:00'),
  (5, 'user', 'Fix the bug in auth.js', 5, 75, 3, '2026-01-29 10:06:00'),
  (6, 'assistant', 'The session check reads obj.property before checking obj; I added a guard.', 19, 75, 3, '2026-01-29 10:06:30'),
  (7, 'tool', 'PASS auth.test.js (12 tests) ... 1200 lines of test output ...', 300, 25, 4, '2026-01-29 10:06:40'),
  (8, 'user', 'Now add a test for the guard', 7, 75, 3, '2026-01-29 10:07:00'),
  (9, 'assistant', 'Added.', 0, 75, 3, '2026-01-29 10:07:00');
INSERT INTO summaries (id, level, content, tokens, source_ids, created_at) VALUES
  (1, 3, 'Fixed null check bug in parser.js:45. Added guard: if (obj && obj.property). Tests pass.', 22, '2,3,4', '2026-01-29 10:05:00');
INSERT INTO keywords (keyword, message_id, summary_id) VALUES ('auth', 5, NULL), ('guard', NULL, 1);
