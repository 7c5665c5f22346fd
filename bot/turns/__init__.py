"""Durable delivery of turns, whatever the surface: the runner (background turns on their own event loop, in
order per conversation, each within its deadline), the queue contract and its two queues (Azure Storage, a local
SQLite file), the workers that take queued turns, and the worker processes beside the web process.

A turn is opaque here: an :class:`~bot.turns.contract.Envelope` of JSON, and the coroutines the surface passes in to
run it or to tell its user something. Nothing in this package imports botbuilder (tests/house/test_architecture.py).
"""
