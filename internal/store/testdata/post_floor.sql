-- One post (BenchmarkPostFloorPgbench): client i posts to room i, as human alice, to its agent.
-- JSON payloads keep a space after each colon: pgbench reads ":name" as a variable.
\set r :client_id % 32
BEGIN;
SELECT min(v) AS a, max(v) AS b FROM (SELECT nextval('event_ids') AS v, p.* FROM room_participants p JOIN bench_rooms x ON x.room = p.room_id CROSS JOIN (SELECT pg_advisory_xact_lock_shared(7665528297554602356), pg_advisory_xact_lock(:r::int, 0)) l WHERE x.i = :r::bigint AND p.active) s \gset
WITH m AS (INSERT INTO messages (id, seq, room_id, author_kind, author_agent_id, author_human, text, reply_to, created_at, agent_hops) SELECT gen_random_uuid(), :a::bigint, x.room, 'human', NULL, 'alice', 'hello', NULL, now(), 0 FROM bench_rooms x WHERE x.i = :r::bigint RETURNING id, room_id),
 w1 AS (INSERT INTO inbound (agent_id, message_id, room_id, seq, state, created_at, context_only) SELECT x.agent, m.id, m.room_id, :a::bigint, 'queued', now(), false FROM m, bench_rooms x WHERE x.i = :r::bigint RETURNING 1)
INSERT INTO events (id, kind, room_id, agent_id, payload, created_at) SELECT :a::bigint, 'message_posted', x.room, NULL, '{"id": "7d0b6f6e-0f67-4a4f-9a57-5b0b1bb2f6a1","seq": 1,"author_kind": "human","author_human": "alice","text": "hello","recipients": ["7d0b6f6e-0f67-4a4f-9a57-5b0b1bb2f6a1"],"agent_hops": 0,"wakes": true}', now() FROM bench_rooms x WHERE x.i = :r::bigint
 UNION ALL SELECT :b::bigint, 'inbound_queued', x.room, x.agent, '{"message_id": "7d0b6f6e-0f67-4a4f-9a57-5b0b1bb2f6a1","seq": 1,"context_only": false}', now() FROM bench_rooms x WHERE x.i = :r::bigint;
COMMIT;
