"""Retrieval: hybrid similarity and the recall stages over a space index."""
