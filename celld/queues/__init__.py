"""Cloudflare Queues under celld: durable messages, batches, retries, dead letter queues.

One broker per session keeps every queue by name (store.py holds the messages, backlog.py
what is waiting and in flight, rules.py when a batch is due and what its outcome does,
dispatcher.py delivers a consumed queue's batches, limits.py checks what producers send).
"""
