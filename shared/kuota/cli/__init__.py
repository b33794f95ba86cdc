"""The ``kuota`` command line (the console script ``kuota.cli:main``).

Theory of operation: one typer app; each command group is a module, a thin
shell over a library (``simulate`` over :mod:`kuota.sim`; ``audit replay``,
``journal export`` and ``explain`` over :mod:`kuota.audit`), so that what a
command does can be tested without a process:

- :mod:`.simulate` (``kuota simulate``), :mod:`.plan` (``kuota plan``, capacity
  planning over :mod:`kuota.sim.plan`), :mod:`.healthcheck` (the image's probe);
- :mod:`.audit`: ``kuota audit replay``, ``kuota journal export``, ``kuota explain``;
- :mod:`.status` (the actuator's read model), :mod:`.events` (``events tail``);
- :mod:`.dashboard` (``kuota dashboard``, the live web app of :mod:`kuota.dashboard`).

They import :mod:`._common` (exit codes, errors, consoles, Kafka settings),
never each other; import-linter holds them to it. This module only builds the
app from them. Why this shape: docs/design/cli.md.
"""

from __future__ import annotations

import typer

from kuota.cli import audit, dashboard, events, healthcheck, plan, simulate, status

app = typer.Typer(
    name="kuota",
    help="Quota admission, borrowing and preemption for DRA GPU jobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Quota admission, borrowing and preemption for DRA GPU jobs."""


# The order is the order of `kuota --help`: the commands, then the groups.
app.command("simulate")(simulate.simulate)
app.command("plan")(plan.plan)
app.command("healthcheck")(healthcheck.healthcheck)
app.command("explain")(audit.explain)
app.command("status")(status.status)
app.command("dashboard")(dashboard.dashboard)
app.add_typer(audit.audit_app, name="audit")
app.add_typer(audit.journal_app, name="journal")
app.add_typer(events.events_app, name="events")


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
