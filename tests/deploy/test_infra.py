"""The deployment files in infra/ checked against the code they deploy: they parse, and their
settings names and values, queue names, the Celery app, GPU reservations, the KEDA trigger and
the API's command hold (nothing runs; how the pods roll out and run is test_pods.py, the real
validators are test_infra_validators.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any, get_args
from urllib.parse import urlparse

import pytest
import yaml
from kombu.transport.redis import PRIORITY_STEPS, Channel
from pydantic import BaseModel

from common.queues import Queue
from common.settings import Settings, VLLMSettings
from tests.helpers.deploy import (
    COMPOSE_FILE,
    COMPOSE_VAR,
    ENV_EXAMPLE,
    GPU_RESOURCE,
    INFRA,
    K8S,
    KUSTOMIZATION,
    WORKLOADS,
    Argv,
    all_argvs,
    as_argv,
    compose_argv,
    configmap,
    containers,
    env_example,
    gpu_stack,
    in_profile,
    interpolate,
    is_celery,
    is_vllm_server,
    k8s_argv,
    k8s_docs,
    k8s_kind,
    kustomization,
    option,
    pod_spec,
    script_variables,
    services,
    worker_queues,
    workload_named,
    yaml_files,
)
from workers.launch import ROOT
from workers.tasks.fair import LANE_PRIORITY

pytestmark = pytest.mark.deploy

EXAMPLE_SUFFIX = ".example.yaml"  # shows a shape, never applied (the example Secret)
CELERY_APP = "workers.celery_app"

ENV_NAME = re.compile(r"(?<![A-Za-z0-9_])ATOMMEM_[A-Z0-9_]+")


# --- settings -----------------------------------------------------------------------------


def model_type(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def is_setting(name: str) -> bool:
    """ATOMMEM_LLM__EXTRACTOR__BASE_URL -> Settings.llm.extractor.base_url exists."""
    *path, leaf = name.removeprefix("ATOMMEM_").lower().split("__")
    model: type[BaseModel] = Settings
    for part in path:
        field = model.model_fields.get(part)
        sub = model_type(field.annotation) if field is not None else None
        if sub is None:
            return False
        model = sub
    return leaf in model.model_fields


def settings_from(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for key in [k for k in os.environ if k.startswith("ATOMMEM_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith("ATOMMEM_"):
            monkeypatch.setenv(key, value)
    return Settings()


def seconds(duration: str | int) -> int:
    if isinstance(duration, int):
        return duration
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert parts and duration, f"unreadable duration {duration!r}"
    h, m, s = (int(x or 0) for x in parts.groups())
    return 3600 * h + 60 * m + s


# --- the files parse ----------------------------------------------------------------------


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(INFRA)))
def test_every_yaml_file_parses(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs
    if path.parent == K8S:
        for doc in docs:
            assert doc["apiVersion"] and doc["kind"]
            assert doc["kind"] == "Kustomization" or doc["metadata"]["name"]


def test_kustomization_lists_every_manifest_but_the_examples() -> None:
    manifests = {p.name for p in K8S.glob("*.yaml")} - {KUSTOMIZATION.name}
    examples = {name for name in manifests if name.endswith(EXAMPLE_SUFFIX)}
    assert sorted(kustomization()["resources"]) == sorted(manifests - examples)
    assert not list(K8S.glob("*.yml")), "use .yaml in infra/k8s"


def test_the_example_secret_is_not_applied() -> None:
    """Its placeholder values (change-me) must never reach a cluster by `apply -k`."""
    applied = [d for name in kustomization()["resources"] for d in k8s_file(name)]
    assert not [d for d in applied if d["kind"] == "Secret"]
    (example,) = k8s_kind("Secret")
    assert example["metadata"]["name"] == "atommem-secrets"


def k8s_file(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d is not None]


# --- settings names and values ------------------------------------------------------------


def test_every_atommem_name_is_a_setting() -> None:
    files = [COMPOSE_FILE, ENV_EXAMPLE, INFRA / "Dockerfile", ROOT / "docs" / "operations.md"]
    files += sorted(K8S.glob("*.yaml"))
    names = {name for f in files for name in ENV_NAME.findall(f.read_text())}
    assert {"ATOMMEM_BROKER__URL", "ATOMMEM_STORE__QDRANT_URL"} <= names
    unknown = sorted(n for n in names - script_variables() if not is_setting(n))
    assert not unknown, f"not fields of common.settings.Settings: {unknown}"


def test_compose_variables_are_listed_in_env_example() -> None:
    used = {m["name"] for m in COMPOSE_VAR.finditer(COMPOSE_FILE.read_text())}
    missing = sorted(used - set(env_example()))
    assert not missing, f"docker-compose.yml uses variables .env.example does not list: {missing}"


def test_compose_environments_build_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    example = env_example()
    checked = 0
    for name, service in services().items():
        raw = service.get("environment") or {}
        if isinstance(raw, list):
            raw = dict(item.split("=", 1) for item in raw)
        env = {k: interpolate(str(v), example) for k, v in raw.items()}
        if not any(k.startswith("ATOMMEM_") for k in env):
            continue
        settings = settings_from(env, monkeypatch)
        broker, qdrant = settings.broker.url, settings.store.qdrant_url
        assert broker and urlparse(broker).hostname in services(), name
        if in_profile(service, "cpu"):
            # the embedded store, opened by the one worker process, on a volume
            assert qdrant is None, name
            if worker_queues(compose_argv(service)):
                mounts = [v.split(":")[1] for v in service["volumes"]]
                assert any(str(settings.store.qdrant_path).startswith(m) for m in mounts), name
        else:
            assert qdrant and urlparse(qdrant).hostname in services(), name
        checked += 1
    assert checked >= 6


def test_k8s_environments_build_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    (cm,) = k8s_kind("ConfigMap")
    (secret,) = k8s_kind("Secret")
    service_names = {s["metadata"]["name"] for s in k8s_kind("Service")}
    for workload, container in containers():
        env: dict[str, str] = {}
        for source in container.get("envFrom", []):
            assert source["configMapRef"]["name"] == cm["metadata"]["name"]
            env |= configmap()
        for item in container.get("env", []):
            ref = item.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                assert ref["name"] == secret["metadata"]["name"]
                assert ref["key"] in secret["stringData"], ref
            env[item["name"]] = "example" if ref else str(item["value"])
        if any(k.startswith("ATOMMEM_") for k in env):
            settings = settings_from(env, monkeypatch)
            assert urlparse(settings.broker.url or "").hostname in service_names
            assert urlparse(settings.store.qdrant_url or "").hostname in service_names
            grace = pod_spec(workload).get("terminationGracePeriodSeconds", 30)
            if worker_queues(k8s_argv(container)):
                assert grace > settings.broker.time_limit, workload["metadata"]["name"]


def test_compose_workers_outlive_the_hard_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    example = env_example()
    for name, service in services().items():
        if worker_queues(compose_argv(service)):
            env = {k: interpolate(str(v), example) for k, v in service["environment"].items()}
            limit = settings_from(env, monkeypatch).broker.time_limit
            assert seconds(service.get("stop_grace_period", "10s")) > limit, name


# --- Celery: the app and the queues -------------------------------------------------------


@pytest.mark.parametrize("source", ["compose", "k8s"])
def test_celery_commands_use_the_app_and_real_queues(source: str) -> None:
    argvs = [a for a in all_argvs()[source] if is_celery(a)]
    assert argvs
    assert importlib.util.find_spec(CELERY_APP) is not None
    for argv in argvs:
        assert option(argv, "-A", "--app") == CELERY_APP, argv

    consumed: set[str] = set()
    for argv in argvs:
        queues = worker_queues(argv) or []
        unknown = set(queues) - {q.value for q in Queue}
        assert not unknown, f"{source}: no such queue {sorted(unknown)} in {argv}"
        consumed |= set(queues)
    assert consumed == {q.value for q in Queue}, f"{source}: no worker for some queue"
    # the GPU pool runs one extract task per GPU (the `cpu` profile's worker has none)
    gpu = [compose_argv(s) for s in gpu_stack().values()] if source == "compose" else argvs
    for argv in gpu:
        if Queue.EXTRACT.value in (worker_queues(argv) or []):
            assert option(argv, "-c", "--concurrency") == "1", "one extract task per GPU"


def test_compose_gpu_services_reserve_an_nvidia_device() -> None:
    gpu = {
        name
        for name, svc in gpu_stack().items()
        if is_vllm_server(compose_argv(svc))
        or Queue.EXTRACT.value in (worker_queues(compose_argv(svc)) or [])
    }
    assert {"vllm", "extract-worker"} <= gpu
    for name in gpu:
        devices = services()[name]["deploy"]["resources"]["reservations"]["devices"]
        assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices), name


def test_k8s_gpu_containers_ask_for_a_gpu() -> None:
    gpu = [
        (w, c)
        for w, c in containers()
        if is_vllm_server(k8s_argv(c)) or Queue.EXTRACT.value in (worker_queues(k8s_argv(c)) or [])
    ]
    assert len(gpu) == 2
    for workload, container in gpu:
        assert int(container["resources"]["limits"][GPU_RESOURCE]) >= 1, workload["metadata"]


def test_k8s_pods_have_no_service_links() -> None:
    """Flower reads every FLOWER_* variable and vLLM reads VLLM_PORT: the FLOWER_PORT and
    VLLM_PORT that service links set (tcp://...) would stop them at start."""
    for workload in (d for d in k8s_docs() if d["kind"] in WORKLOADS):
        assert pod_spec(workload).get("enableServiceLinks") is False, workload["metadata"]


def test_redis_keeps_an_append_only_file() -> None:
    argvs = [compose_argv(services()["redis"])]
    argvs += [k8s_argv(c) for w, c in containers() if w["metadata"]["name"] == "redis"]
    assert len(argvs) == 2
    for argv in argvs:
        assert option(argv, "--appendonly", "--appendonly") == "yes"
        assert option(argv, "--appendfsync", "--appendfsync") == "everysec"


# --- the Fact Executor and the GPU pool's scaler ------------------------------------------


def vllm_checks(argv: Argv, model: str, base_url: str, hosts: set[str]) -> None:
    lora = option(argv, "--lora-modules", "--lora-modules")
    assert "--enable-lora" in argv and lora
    assert lora.split("=", 1)[0] == model, "the extractor model is the served LoRA adapter"
    assert option(argv, "--max-lora-rank", "--max-lora-rank") == str(VLLMSettings().lora_rank)
    url = urlparse(base_url)
    assert url.hostname in hosts
    assert str(url.port) == option(argv, "--port", "--port")
    assert url.path == "/v1"


def test_compose_extractor_role_is_the_vllm_service() -> None:
    env = services()["extract-worker"]["environment"]
    argv = compose_argv(services()["vllm"])
    model, url = env["ATOMMEM_LLM__EXTRACTOR__MODEL"], env["ATOMMEM_LLM__EXTRACTOR__BASE_URL"]
    vllm_checks(argv, model, url, {"vllm"})


def test_k8s_extractor_role_is_the_vllm_service() -> None:
    cm = configmap()
    (argv,) = [k8s_argv(c) for _, c in containers() if is_vllm_server(k8s_argv(c))]
    services_ = {s["metadata"]["name"] for s in k8s_kind("Service")}
    model, url = cm["ATOMMEM_LLM__EXTRACTOR__MODEL"], cm["ATOMMEM_LLM__EXTRACTOR__BASE_URL"]
    vllm_checks(argv, model, url, services_)


def test_keda_scales_the_extract_workers_on_the_extract_list() -> None:
    (scaled,) = k8s_kind("ScaledObject")
    spec = scaled["spec"]
    # Extract work waits in two Redis lists: the queue's own (default priority) and the one
    # kombu keeps for the fair lanes' priority, where every chunk waits when the lanes are on.
    lists = {t["metadata"]["listName"] for t in spec["triggers"]}
    assert LANE_PRIORITY in PRIORITY_STEPS  # a step of its own, so the list is named after it
    lane = f"{Queue.EXTRACT.value}{Channel.sep}{LANE_PRIORITY}"
    assert lists == {Queue.EXTRACT.value, lane}
    assert all(t["type"] == "redis" for t in spec["triggers"])
    assert all(int(t["metadata"]["listLength"]) >= 1 for t in spec["triggers"])
    assert len({json.dumps(t["metadata"], sort_keys=True) for t in spec["triggers"]}) == 2
    meta = spec["triggers"][0]["metadata"]
    for trigger in spec["triggers"]:
        same = {k: v for k, v in trigger["metadata"].items() if k not in {"listName"}}
        assert same == {k: v for k, v in meta.items() if k not in {"listName"}}
    assert 0 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]

    (target,) = [
        w for w in k8s_kind("Deployment") if w["metadata"]["name"] == spec["scaleTargetRef"]["name"]
    ]
    (container,) = pod_spec(target)["containers"]
    assert container["name"] == spec["scaleTargetRef"]["envSourceContainerName"]
    assert worker_queues(k8s_argv(container)) == [Queue.EXTRACT.value]

    # The scaler reads the broker's Redis: same Service, port and database. It connects from
    # KEDA's namespace, so it names the Service by its full DNS name in the app's namespace.
    cm = configmap()
    assert {"configMapRef": {"name": "atommem-env"}} in container["envFrom"]
    broker = urlparse(cm["ATOMMEM_BROKER__URL"])
    namespace = kustomization()["namespace"]
    assert broker.hostname in {s["metadata"]["name"] for s in k8s_kind("Service")}
    fqdn = f"{broker.hostname}.{namespace}.svc.cluster.local"
    assert cm[meta["addressFromEnv"]] == f"{fqdn}:{broker.port}"
    assert meta["databaseIndex"] == (broker.path.strip("/") or "0")


def test_the_keda_target_leaves_replicas_to_the_autoscaler() -> None:
    """A `replicas` in the target resets the count KEDA set on every `kubectl apply`."""
    for scaled in k8s_kind("ScaledObject"):
        target = workload_named(scaled["spec"]["scaleTargetRef"]["name"])
        assert "replicas" not in target["spec"], target["metadata"]["name"]


# --- the API ------------------------------------------------------------------------------


def test_api_runs_the_app_factory_with_health_and_readiness() -> None:
    api = services()["api"]
    argv = compose_argv(api)
    assert argv[0] == "uvicorn" and "--factory" in argv and "api.main:create_app" in argv
    assert "/healthz" in " ".join(as_argv(api["healthcheck"]["test"]))

    ((_, container),) = [(w, c) for w, c in containers() if w["metadata"]["name"] == "api"]
    assert k8s_argv(container)[:3] == ["uvicorn", "--factory", "api.main:create_app"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_the_api_runs_from_the_slim_image() -> None:
    """The API is a producer: its image is the Dockerfile's `api` target (no torch)."""
    api = services()["api"]
    assert api["build"]["target"] == "api"
    assert re.search(r"^FROM base AS api$", (INFRA / "Dockerfile").read_text(), re.MULTILINE)
    ((_, container),) = [(w, c) for w, c in containers() if w["metadata"]["name"] == "api"]
    assert container["image"] == interpolate(api["image"], {})
