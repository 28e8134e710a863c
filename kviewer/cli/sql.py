"""``kviewer sql FILE [FILE ...] QUERY``: one read-only SQL statement against the files' unified
model (or a database written by ``kviewer export``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import kviewer
from kviewer import io as kio
from kviewer.cli.common import EXIT_OK, add_load_options, cache_choice, load_for, write_frame
from kviewer.errors import UserError

if TYPE_CHECKING:
    import kviewer.io.cache
    import kviewer.sqldb


def register(sub: Any) -> None:
    qp = sub.add_parser(
        "sql", help="run a SQL query against the files' unified model (read-only)",
        description="Run one SQL statement (the schema of kviewer export) against FILE(s), or against a database written "
        "by kviewer export. Only the tables the statement reads are built, into a database kept in the trace cache "
        "(read-only to the query; in memory with --no-cache), so a later query on the same files is fast. The input "
        "files are never written.",
    )
    qp.add_argument("items", metavar="FILE [FILE ...] QUERY", nargs="+", help="trace files (or one export), then the query")
    qp.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format (default: %(default)s)")
    qp.add_argument("--timeout", type=float, default=60.0, metavar="S", help="interrupt the query after S seconds (default: %(default)s)")
    qp.add_argument("--no-analysis", action="store_true", help="leave out the speed of light and fusion tables (faster)")
    add_load_options(qp)
    qp.set_defaults(func=cmd_sql)


def cmd_sql(args: argparse.Namespace) -> int:
    """Run one SQL statement against the files' unified model (read-only, nothing written)."""
    if len(args.items) < 2:
        raise UserError("sql needs at least one FILE and a QUERY (kviewer sql FILE [FILE ...] \"SELECT ...\")")
    *files, sql = args.items
    conn = kviewer.sqldb.open_export(files[0]) if len(files) == 1 else None  # a database written by kviewer export
    try:
        if conn is not None:
            try:
                df = kviewer.sqldb.query(conn, sql, timeout_s=args.timeout)
            finally:
                conn.close()
        else:
            # only the tables the query reads are built, and kept in the cache beside the traces'
            # (unless the cache is off): a second query on the same files loads nothing
            use_cache = cache_choice(args) is not False and not kio.cache.cache_disabled()
            df = kviewer.sqldb.query_files(files, sql, lambda f, tables: load_for(args, f, tables=tables), analysis=not args.no_analysis,
                                   use_cache=use_cache, timeout_s=args.timeout)
    except kviewer.sqldb.QueryError as exc:
        raise UserError(str(exc)) from exc
    write_frame(df, args.format)
    return EXIT_OK

