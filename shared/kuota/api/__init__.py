"""Typed, immutable views of the Kubernetes objects kuota reads.

``kuota.api.types`` holds the frozen dataclasses (the contract between parsing
and the core); ``kuota.api.parse`` turns manifests (plain dicts, as users write
them or as the apiserver returns them) into those types or a ``ValidationError``
naming the object and the field. Pure: no I/O.
"""
