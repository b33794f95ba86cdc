"""Kubernetes adapter: list+watch with relist on 410 Gone (``watch``, kubernetes-asyncio),
and the pure code ingest runs on what it sees: objects into journal events
(``translate``) and the mutating webhook's AdmissionReview answer (``admission_review``)."""
