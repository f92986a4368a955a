"""An environment from an existing SQLite database: its tables become collections.

`env_from_sqlite(db, out)` reads the schema (tables, keys, foreign keys, unique indexes,
CHECK constraints, defaults) and the rows of a SQLite file, opened read-only, and writes a
folder that `agent-env validate` loads:

* `env.yaml`: one collection per table, keyed by its primary key, with a JSON schema made
  from the column types; `get`/`list`/`search` document (CRUD) tools per table; roles
  `agent` (everything but deletes) and `admin`;
* `seed/<table>.json`: the rows, ordered by primary key;
* `tools.py`: `create_*`/`update_*`/`delete_*` per table, thin wrappers whose checks
  (foreign keys, unique columns, enum transitions) live in `agentenv.synth.sqlite.runtime`.

It never raises for bad input: everything it found, and every problem, is in the returned
`SqliteReport` (`ok` is False when nothing was written). docs/env-from-database.md lists
each decision (types, enums, keys, cycles). The modules follow the same order:

* `report`: `SqliteReport` and `TableReport`;
* `naming`: SQL names made into collection, field, tool and type names;
* `sqltext`: a SQL tokenizer, CHECK constraints and column defaults;
* `model`: column types, and the columns, foreign keys and tables read;
* `reader`: reading the tables, rows and constraints of the database;
* `analyse`: the whole database: references, transitions, enums, cycles;
* `render_env`: the seed files and env.yaml;
* `render_tools`: tools.py;
* `generate`: the entry point, `env_from_sqlite`;
* `runtime`: `SqliteRules`, the rules the generated tools apply when they run.
"""

from __future__ import annotations

from agentenv.synth.sqlite.generate import ENUM_MAX, MAX_ROWS, env_from_sqlite
from agentenv.synth.sqlite.model import sql_type_family
from agentenv.synth.sqlite.report import SqliteReport, TableReport
from agentenv.synth.sqlite.sqltext import check_constraints, parse_check, parse_default

__all__ = [
    "ENUM_MAX",
    "MAX_ROWS",
    "SqliteReport",
    "TableReport",
    "check_constraints",
    "env_from_sqlite",
    "parse_check",
    "parse_default",
    "sql_type_family",
]
