"""bot/turns: durable turns, their queues, leases and workers."""
