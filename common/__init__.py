"""Shared kernel of AtomMem: settings, models, store, embeddings, memory construction, retrieval."""
