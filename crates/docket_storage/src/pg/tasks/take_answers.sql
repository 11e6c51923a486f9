-- Hands over the answers the running work has not taken yet, and empties them, in
-- one statement: the sub-select locks the row and keeps the old value to return.
-- Writes nothing when there is nothing to take (the work polls).
-- $1 task_id.
UPDATE call_tasks AS task
   SET input_answers = '{}'
  FROM (
      SELECT task_id, input_answers
        FROM call_tasks
       WHERE task_id = $1
         FOR UPDATE
  ) AS taken
 WHERE task.task_id = taken.task_id
   AND taken.input_answers <> '{}'
RETURNING taken.input_answers
