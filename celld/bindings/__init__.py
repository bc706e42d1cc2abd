"""Storage, assets and offline-only bindings: KV, D1, R2, `assets`, Workers AI and friends."""
