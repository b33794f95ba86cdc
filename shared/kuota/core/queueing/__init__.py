"""Queues, workload records and verdicts: who waits where, in what order, and why."""
