/*
 * A group of webhook deliveries on PostgreSQL, whatever its size: their keys
 * claimed at once, and the duplicates' jobs looked up (on SQLite, in the
 * daemon's process, a statement per row costs less than building these).
 * Arrays are PostgreSQL's; these number their own parameters.
 */
export const PG_CLAIM_DELIVERIES = `INSERT INTO webhook_deliveries (hook_id, delivery_id, event, received_at, job_id)
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[])
  ON CONFLICT (hook_id, delivery_id) DO NOTHING RETURNING hook_id, delivery_id, job_id`;
export const PG_DELIVERY_JOBS = `SELECT d.hook_id, d.delivery_id, d.job_id FROM webhook_deliveries d
  JOIN unnest($1::text[], $2::text[]) AS k(hook_id, delivery_id) ON d.hook_id = k.hook_id AND d.delivery_id = k.delivery_id`;
