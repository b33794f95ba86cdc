"""Kafka adapter: topic layout, settings, and the transactional
consume-transform-produce loop the stream processors run in."""
