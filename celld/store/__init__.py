"""Durable state: one interface, SQLite (WAL, synchronous=FULL) first."""

from celld.store.base import InstanceRef, Store
from celld.store.sqlite import SqliteStore

__all__ = ["InstanceRef", "SqliteStore", "Store"]
