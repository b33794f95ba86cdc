"""The live dashboard behind ``kuota dashboard`` (an adapter, not the core).

:mod:`.view` turns what the readers saw into JSON for the page (no I/O);
:mod:`.live` runs the readers (the actuator's Redis read model, the decision
topic, the journal folded by the services' fold); :mod:`.server` is the
aiohttp application and ``static/`` the page. Design: docs/design/dashboard.md.
"""
