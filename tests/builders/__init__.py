"""Builders every test folder shares: manifests, a fold driver, fakes.

``tests/`` is on ``sys.path`` in every run (``tests/conftest.py`` lives there and
pytest's default import mode puts a rootdir conftest's folder first), so any
test imports ``from builders.manifests import job``. One argument order
everywhere: the object's name first, every option keyword-only
(``job("j", namespace="ns", gpus=4)``, ``local_queue("lq", namespace="ns",
cluster_queue="a")``).

- :mod:`builders.manifests`: Kueue, batch and DRA manifests as plain dicts;
- :mod:`builders.driver`: :class:`~builders.driver.Driver` feeds a Fold journal
  events with increasing ids and keeps every decision;
- :mod:`builders.kafka`: :class:`~builders.kafka.FakeProducer`, an aiokafka
  producer that records what it is given.
"""
