-- SPDX-License-Identifier: MIT
-- The example's one table; guard.py runs this at start (it is idempotent).
CREATE TABLE IF NOT EXISTS users (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
