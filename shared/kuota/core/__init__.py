"""The pure decision core: quota accounting, DRA charging, cohorts, ordering,
flavor assignment and (later) preemption. It reads no clock, draws no random
numbers and does no I/O; time arrives in events."""
