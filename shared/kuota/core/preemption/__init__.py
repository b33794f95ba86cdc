"""Preemption: classical and fair-sharing victim search, plans, and WaitForPodsReady."""
