"""Kafka adapter: the topic layout (``topics``), settings, client start-up that tells
a refusal from an outage (``connect``), dead letters (``deadletter``), and the
transactional consume-transform-produce loop the stream processors run in (``processor``)."""
