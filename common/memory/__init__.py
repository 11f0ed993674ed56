"""Memory construction: verification, event consolidation, temporal profiles (plain functions)."""
