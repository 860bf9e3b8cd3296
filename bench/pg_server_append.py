r"""The server's side of an append under N writers, driven by pgbench (C clients), next to raw INSERT+COMMIT.

Usage::

    .venv/bin/python bench/pg_server_append.py [--clients 16] [--seconds 6] [--rounds 3]

``bench_pg_writers.py`` runs N Python processes next to N raw psycopg processes: on two cores their clients
take half the CPU, and what is left of a run's noise is the scheduler's. Here pgbench, a C client, sends
the statements, so the figure is the server's own pace. Every transaction first reads its client's session
and next version (one small ``\gset`` query, the same in every script: its cost is on both sides), then:

- ``raw``: an INSERT + COMMIT of the same bytes into a table of ``bench_pg_writers``'s raw shape (a primary
  key on the stream and version, a ``bigserial`` id without an index);
- ``raw + id index``: the same with a unique index on that id, the index a log's readers need;
- ``ours``: the ledger's own append function (``<table>_append``, ADRs 0031, 0035), as an append runs it;
- ``ours without the claim lock`` / ``without the turn lock`` / ``without either``: the same function with the
  advisory locks taken out, to show what they cost. **These variants are not correct** (readers could skip a
  commit, two writers of a session could interleave): they are measured, never used.

Rounds interleave every script; each figure is the median transactions/s with its min-max, and its ratio
to the median of ``raw``. Needs ``pgbench`` (in Debian's ``postgresql-15``, the server's package) and the
server of ``CONTEXTLEDGER_TEST_POSTGRES``. Results: ``bench/results/pg_server_append.json``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import contextledger
import psycopg
from psycopg.sql import SQL, Identifier, Literal

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bench_pg_writers import PG, _drop, _raw_table, _schema
from harness import machine, save

EVENTS = "contextledger_events"
PAYLOAD = "\\x81" + "78" * 300
"""The 301 bytes each transaction writes (a msgpack map's first byte, then 300 x): bench_pg_writers's size."""
TOPIC = "contextledger/UserMessageAdded/v1"
_CLAIM = re.compile(r"PERFORM pg_advisory_lock\([^;]*\); |done := pg_advisory_unlock\([^;]*\); ")
_TURN = re.compile(r"PERFORM pg_advisory_xact_lock\(hashtextextended\([^;]*\); ")


def _setup(clients: int) -> str:
    """A fresh schema: a ledger with one session per client, the raw tables, each client's session.

    The variants of the append function are made from the one the ledger installed (its source and arguments
    as PostgreSQL holds them), so what is measured is what an append runs.
    """
    schema, url = _schema()
    with contextledger.open_ledger(url) as ledger:
        sessions = [ledger.start_session(system_prompt="bench") for _ in range(clients)]
    raw = _raw_table(schema)  # bench_pg_writers's floor table
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(
            SQL(f"CREATE TABLE {{}} (LIKE {raw} INCLUDING ALL, UNIQUE (notification_id))").format(
                Identifier(schema, "raw_indexed")
            )
        )
        conn.execute(
            SQL("CREATE TABLE {} (client int PRIMARY KEY, sid text)").format(Identifier(schema, "sids"))
        )
        for client, session in enumerate(sessions):
            conn.execute(
                SQL("INSERT INTO {} VALUES (%s, %s)").format(Identifier(schema, "sids")), (client, session)
            )
        installed = conn.execute(
            "SELECT prosrc, pg_get_function_arguments(oid) FROM pg_proc WHERE oid = %s::regproc",
            (f'"{schema}".{EVENTS}_append',),
        ).fetchone()
        assert installed is not None
        body, arguments = installed
        variants = {
            "ours_no_claim": _CLAIM.sub("", body),
            "ours_no_turn": _TURN.sub("", body),
            "ours_neither": _TURN.sub("", _CLAIM.sub("", body)),
        }
        for name, text in variants.items():
            assert text != body, name  # the pattern found what it takes out
            conn.execute(
                SQL(f"CREATE FUNCTION {{}}({arguments}) RETURNS bigint[] LANGUAGE plpgsql AS {{}}").format(
                    Identifier(schema, name), Literal(text)
                )
            )
    return schema


def _scripts(schema: str) -> dict[str, str]:
    """Each measured transaction as a pgbench script: the same lookup first, then its write."""
    q = f'"{schema}"'
    lookup = (
        f"SELECT sid, (SELECT max(originator_version) FROM {q}.{EVENTS} WHERE originator_id = sid) + 1 AS nv "
        f"FROM {q}.sids WHERE client = :client_id \\gset\n"
    )
    rows = (
        "(originator_id, originator_version, topic, state) "
        f"VALUES ('raw' || :client_id, :v, 't', '{PAYLOAD}'::bytea);\n"
    )
    raw = "\\set v random(1, 9000000000000000000)\n"
    call = (
        "(ARRAY[:sid::text], ARRAY[:nv::bigint], ARRAY['"
        + TOPIC
        + "'::text], ARRAY['"
        + PAYLOAD
        + "'::bytea], "
        "'{}', '{}', '{}', '{}', '{}', '{}');\n"
    )
    return {
        "raw": lookup + raw + f"INSERT INTO {q}.raw {rows}",
        "raw + id index": lookup + raw + f"INSERT INTO {q}.raw_indexed {rows}",
        "ours": lookup + f"SELECT {q}.{EVENTS}_append" + call,
        "ours without the claim lock": lookup + f"SELECT {q}.ours_no_claim" + call,
        "ours without the turn lock": lookup + f"SELECT {q}.ours_no_turn" + call,
        "ours without either": lookup + f"SELECT {q}.ours_neither" + call,
    }


def _pgbench(script: str, clients: int, seconds: int, folder: Path) -> float:
    """Transactions/s of ``clients`` pgbench clients running ``script`` for ``seconds`` (prepared)."""
    path = folder / "script.sql"
    path.write_text(script)
    info = psycopg.conninfo.conninfo_to_dict(PG)
    command = [
        shutil.which("pgbench") or "pgbench", "-n", "-M", "prepared", "-c", str(clients), "-j", "2",
        "-T", str(seconds), "-f", str(path), "-h", str(info.get("host", "127.0.0.1")),
        "-p", str(info.get("port", 5432)), "-U", str(info.get("user", "postgres")),
        str(info.get("dbname", "test")),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = re.search(r"tps = ([\d.]+)", done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"pgbench failed: {done.stderr[-800:]}")
    return float(found.group(1))


def main() -> None:
    """Interleave every script ``--rounds`` times; print the medians and their ratios to raw."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    schema = _setup(args.clients)
    found: dict[str, list[float]] = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            for round_ in range(args.rounds):
                for name, script in _scripts(schema).items():
                    found.setdefault(name, []).append(
                        _pgbench(script, args.clients, args.seconds, Path(folder))
                    )
                print(
                    f"# round {round_ + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in found.items()),
                    flush=True,
                )
    finally:
        _drop(schema)
    raw = statistics.median(found["raw"])
    print(f"\n{args.clients} pgbench clients, {args.seconds} s a run, {args.rounds} rounds interleaved\n")
    print("| transaction (after the same lookup) | tps, median (min-max) | of raw |")
    print("|---|---:|---:|")
    for name, values in found.items():
        median = statistics.median(values)
        print(f"| {name} | {median:,.0f} ({min(values):,.0f}-{max(values):,.0f}) | {median / raw:.0%} |")
    facts = machine()
    print(f"\n{facts['cpus']} CPUs, load1 {facts['load1']}, Python {facts['python']}, {facts['when']}")
    save(
        "pg_server_append",
        {
            "clients": args.clients,
            "seconds": args.seconds,
            "rounds": args.rounds,
            "tps": found,
            "machine": facts,
        },
    )


if __name__ == "__main__":
    main()
