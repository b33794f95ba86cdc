"""Kubernetes adapter (kubernetes-asyncio): list+watch with relist on 410 Gone."""
