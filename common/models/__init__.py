"""Pydantic models, one module per boundary: sessions (`session`), memory records (`memory`),
jobs and task payloads (`jobs`), write plans (`plan`), extraction drafts (`drafts`), the HTTP
API's bodies (`api`) and replies (`responses`, `query`), and deterministic ids (`ids`)."""
