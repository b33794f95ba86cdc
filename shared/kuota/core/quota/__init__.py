"""The cohort tree: quotas, usage, lending and borrowing limits, and Dominant Resource Share."""
