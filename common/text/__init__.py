"""Text normalisation shared by extraction, verification and retrieval."""
