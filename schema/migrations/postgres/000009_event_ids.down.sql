UPDATE counters SET value = GREATEST(value,
  (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM event_ids)) WHERE name = 'events';
DROP SEQUENCE event_ids;
