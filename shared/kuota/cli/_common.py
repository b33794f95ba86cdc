"""What every ``kuota`` command shares: exit codes, errors, consoles, sources.

Theory of operation: a command that cannot go on raises :func:`fail`, which
writes one ``kuota: error: ...`` line to stderr and ends the process with an
exit code (never a traceback). Machine output goes to stdout
(:func:`stdout_console`, or plain JSON lines), people's output (progress,
summaries, errors) to stderr. :func:`run_async` runs a command's coroutine and
turns Kafka, Redis and source errors into :func:`fail`; :func:`kafka_settings`
reads the same ``KUOTA_*`` variables as the services. The Kafka and Redis
clients (and the core) are imported where they are used, so that ``kuota
--help`` and ``kuota healthcheck`` load none of them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import typer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from kuota.bus.settings import KafkaSettings

#: Done (``audit replay``: identical; ``healthcheck``: the service answers).
EXIT_OK = 0
#: The command ran and the answer is no: ``audit replay`` found a divergence, a
#: ``simulate`` run could not finish, the probed service does not answer.
EXIT_FAILED = 1
#: Bad input, or a source that cannot be read (a missing setting, an unreadable
#: file, an unknown topic, Kafka or Redis unreachable).
EXIT_BAD_INPUT = 2
#: Ctrl-C.
EXIT_INTERRUPTED = 130

T = TypeVar("T")


def fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    """Write ``kuota: error: message`` to stderr; the caller raises the result."""
    sys.stderr.write(f"kuota: error: {message}\n")
    return typer.Exit(code=code)


def check_workload(key: str) -> str:
    """The canonical workload key of ``key``: ``namespace/name`` for a Job,
    ``namespace/<kind>/name`` for another kind (``team-a/pytorchjob/ddp``; the
    kind in any case), as decisions carry it (docs/design/workload-identity.md)."""
    from kuota.kinds import segments, workload_ref

    ref = workload_ref(key)
    if ref is None:
        raise fail(
            f"{key!r}: give the workload as namespace/name (a Job) or "
            f"namespace/<kind>/name, <kind> one of {', '.join(segments())}"
        )
    return ref.key


def kafka_settings() -> KafkaSettings:
    from kuota.bus.settings import KafkaSettings, SettingsError

    try:
        return KafkaSettings.from_env()
    except SettingsError as err:
        raise fail(str(err)) from None


def run_async(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine; Kafka, Redis and source errors become one line and exit 2."""
    import asyncio

    from aiokafka.errors import KafkaError
    from redis.exceptions import RedisError

    from kuota.audit.files import ExportError
    from kuota.audit.kafka import AuditSourceError
    from kuota.bus.settings import SettingsError

    # aiokafka logs connection retries itself; the one line below says it all.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    try:
        return asyncio.run(make())
    except (AuditSourceError, ExportError, SettingsError) as err:
        raise fail(str(err)) from None
    except (KafkaError, RedisError, OSError) as err:
        raise fail(f"{type(err).__name__}: {err}") from None
    except KeyboardInterrupt:
        raise typer.Exit(code=EXIT_INTERRUPTED) from None


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def stdout_console() -> Console:
    from rich.console import Console

    # Not a terminal (a pipe, a CI log, a test): lines are not wrapped, so one
    # decision stays one line for grep; tables get a generous width.
    tty = sys.stdout.isatty()
    return Console(width=None if tty else 200, soft_wrap=not tty, highlight=False)


def progress_bar(label: str, total: int | None) -> Progress:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    console = stderr_console()
    if not console.is_terminal:
        # Disabled, rich still ends a Live display with a newline: give it nowhere to write.
        import io

        from rich.console import Console

        console = Console(file=io.StringIO())
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
