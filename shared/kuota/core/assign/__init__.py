"""Flavor assignment: which ResourceFlavor each podset's resources come from, and fitting."""
