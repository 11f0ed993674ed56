"""The deployment files in infra/ checked against the code they deploy: settings names and
values, queue names, the Celery app, GPU reservations, the KEDA trigger, probes, rollout
strategies, images and security contexts (nothing runs but the probe commands; the real
validators are in test_infra_validators.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, get_args
from urllib.parse import urlparse

import pytest
import yaml
from kombu.transport.redis import PRIORITY_STEPS, Channel
from pydantic import BaseModel

from common.queues import Queue
from common.settings import Settings, VLLMSettings
from workers.tasks.fair import LANE_PRIORITY

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
COMPOSE_FILE = INFRA / "compose" / "docker-compose.yml"
ENV_EXAMPLE = INFRA / "compose" / ".env.example"
K8S = INFRA / "k8s"
KUSTOMIZATION = K8S / "kustomization.yaml"
EXAMPLE_SUFFIX = ".example.yaml"  # shows a shape, never applied (the example Secret)
CELERY_APP = "workers.celery_app"
GPU_RESOURCE = "nvidia.com/gpu"

SCRIPT_VAR = re.compile(r"\$\{(ATOMMEM_[A-Z0-9_]+):-")
ENV_NAME = re.compile(r"(?<![A-Za-z0-9_])ATOMMEM_[A-Z0-9_]+")
COMPOSE_VAR = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")
WORKLOADS = {"Deployment", "StatefulSet"}

Argv = list[str]


# --- loading ------------------------------------------------------------------------------


def yaml_files() -> list[Path]:
    return sorted(p for p in INFRA.rglob("*") if p.suffix in {".yml", ".yaml"})


def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return doc


def services() -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = compose()["services"]
    return result


def env_example() -> dict[str, str]:
    pairs = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f".env.example: not KEY=VALUE: {line!r}"
            pairs[key.strip()] = value.strip()
    return pairs


def script_variables() -> set[str]:
    """ATOMMEM_* names the local scripts read with a default (`${ATOMMEM_VENV:-.venv}`): theirs,
    not settings."""
    scripts = [INFRA / "dev.sh", *sorted((INFRA / "local").glob("*.sh"))]
    names = {m for f in scripts for m in SCRIPT_VAR.findall(f.read_text())}
    return {n for n in names if "__" not in n}  # a setting has a section: ATOMMEM_X__Y


def k8s_docs() -> list[dict[str, Any]]:
    """Every manifest in infra/k8s, the examples included."""
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path != KUSTOMIZATION:
            docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d is not None)
    return docs


def kustomization() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(KUSTOMIZATION.read_text())
    return doc


def k8s_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in k8s_docs() if d["kind"] == kind]


def configmap() -> dict[str, str]:
    (cm,) = k8s_kind("ConfigMap")
    data: dict[str, str] = cm["data"]
    return data


def containers() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, container) for every container of every Deployment and StatefulSet."""
    return [(w, c) for w in k8s_docs() if w["kind"] in WORKLOADS for c in pod_spec(w)["containers"]]


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def workload(name: str) -> dict[str, Any]:
    (found,) = [w for w in k8s_docs() if w["kind"] in WORKLOADS and w["metadata"]["name"] == name]
    return found


# --- commands -----------------------------------------------------------------------------


def as_argv(value: str | list[Any] | None) -> Argv:
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def compose_argv(service: dict[str, Any]) -> Argv:
    return as_argv(service.get("entrypoint")) + as_argv(service.get("command"))


def k8s_argv(container: dict[str, Any]) -> Argv:
    return as_argv(container.get("command")) + as_argv(container.get("args"))


def option(argv: Argv, short: str, long: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg in (short, long) and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(f"{long}="):
            return arg.split("=", 1)[1]
    return None


def is_celery(argv: Argv) -> bool:
    return bool(argv) and Path(argv[0]).name == "celery"


def worker_queues(argv: Argv) -> list[str] | None:
    """The -Q list of a `celery worker` command line; None for anything else."""
    if not (is_celery(argv) and "worker" in argv):
        return None
    queues = option(argv, "-Q", "--queues")
    assert queues, f"a worker without -Q consumes only the default queue: {argv}"
    return queues.split(",")


def is_vllm_server(argv: Argv) -> bool:
    return argv[:2] == ["vllm", "serve"]


def all_argvs() -> dict[str, list[Argv]]:
    return {
        "compose": [compose_argv(s) for s in services().values()],
        "k8s": [k8s_argv(c) for _, c in containers()],
    }


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


def interpolate(value: str, example: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?message} against .env.example."""

    def sub(m: re.Match[str]) -> str:
        name, op, arg = m["name"], m["op"], m["arg"]
        got = example.get(name, "")
        if not got and op in (":-", "-"):
            return str(arg)
        if not got and op in (":?", "?"):
            return f"example-{name.lower()}"  # a secret the operator must fill in
        return got

    return COMPOSE_VAR.sub(sub, value)


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
        assert qdrant and urlparse(qdrant).hostname in services(), name
        checked += 1
    assert checked >= 4


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
        if Queue.EXTRACT.value in queues:
            assert option(argv, "-c", "--concurrency") == "1", "one extract task per GPU"
    assert consumed == {q.value for q in Queue}, f"{source}: no worker for some queue"


def test_compose_gpu_services_reserve_an_nvidia_device() -> None:
    gpu = {
        name
        for name, svc in services().items()
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
        target = workload(scaled["spec"]["scaleTargetRef"]["name"])
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


# --- rollouts and images ------------------------------------------------------------------

RELEASE = re.compile(r"\d+\.\d+\.\d+")  # a full version: `7` or `latest` floats


def gpu_workloads() -> list[dict[str, Any]]:
    return [
        w
        for w in k8s_docs()
        if w["kind"] in WORKLOADS
        and any(
            GPU_RESOURCE in c.get("resources", {}).get("limits", {})
            for c in pod_spec(w)["containers"]
        )
    ]


def test_gpu_deployments_never_run_old_and_new_pods_at_once() -> None:
    """A GPU pod holds its GPU (and vllm its ReadWriteOnce volume): a surge pod would wait
    for one forever, so a rollout stops the old pod first."""
    gpu = gpu_workloads()
    assert {w["metadata"]["name"] for w in gpu} == {"vllm", "extract-worker"}
    for w in gpu:
        strategy = w["spec"].get("strategy", {})
        surge = strategy.get("rollingUpdate", {}).get("maxSurge", "25%")
        assert strategy.get("type") == "Recreate" or surge in (0, "0", "0%"), w["metadata"]
    assert workload("vllm")["spec"]["strategy"]["type"] == "Recreate"


def image_problem(image: str) -> str | None:
    """Why `image` is not a registry-qualified, pinned reference; None when it is."""
    name, _, tag = image.rpartition(":")
    registry = image.split("/", 1)[0]
    if "/" not in image or not ("." in registry or ":" in registry or registry == "localhost"):
        return "names no registry"
    if not name or "/" in tag or not RELEASE.search(tag):
        return "has no pinned release tag"
    return None


def all_images() -> dict[str, str]:
    """Every image reference: compose (with .env.example and with no .env at all), the k8s
    manifests and the Dockerfile's base."""
    found = {}
    for env_name, env in (("env.example", env_example()), ("defaults", {})):
        for name, svc in services().items():
            found[f"compose {name} ({env_name})"] = interpolate(svc["image"], env)
    for w, c in containers():
        found[f"k8s {w['metadata']['name']}/{c['name']}"] = c["image"]
    for line in (INFRA / "Dockerfile").read_text().splitlines():
        if line.startswith("FROM ") and not line.startswith("FROM base "):
            found[f"Dockerfile {line}"] = line.split()[1]
    return found


def test_images_name_a_registry_and_a_pinned_release() -> None:
    bad = {
        where: f"{image} {image_problem(image)}"
        for where, image in all_images().items()
        if image_problem(image)
    }
    assert not bad, bad


def test_kustomize_retags_every_app_image() -> None:
    app = {c["image"].rpartition(":")[0] for _, c in containers() if "/atommem/" in c["image"]}
    assert len(app) == 3, app
    retagged = {i["name"]: i for i in kustomization()["images"]}
    assert set(retagged) == app
    for name, entry in retagged.items():
        assert RELEASE.fullmatch(entry["newTag"]), name


def test_vllm_is_one_pinned_release_everywhere() -> None:
    """The vllm server image and the `gpu` image's in-process engine run the same release."""
    dockerfile = (INFRA / "Dockerfile").read_text()
    match = re.search(r"^ARG VLLM_VERSION=(\S+)$", dockerfile, re.MULTILINE)
    assert match and RELEASE.fullmatch(match[1]), "infra/Dockerfile pins no VLLM_VERSION"
    assert '"vllm==${VLLM_VERSION}"' in dockerfile
    tag = f"v{match[1]}"
    (k8s_image,) = [c["image"] for _, c in containers() if is_vllm_server(k8s_argv(c))]
    assert k8s_image.endswith(f"/vllm/vllm-openai:{tag}")
    compose_image = services()["vllm"]["image"]
    assert interpolate(compose_image, env_example()).endswith(f":{tag}")
    assert interpolate(compose_image, {}).endswith(f":{tag}")


# --- Redis ----------------------------------------------------------------------------------


def redis_argvs() -> dict[str, Argv]:
    ((_, container),) = [(w, c) for w, c in containers() if w["metadata"]["name"] == "redis"]
    compose_redis = [interpolate(a, env_example()) for a in compose_argv(services()["redis"])]
    return {"compose": compose_redis, "k8s": k8s_argv(container)}


def memory_bytes(size: str) -> int:
    """Redis sizes (1gb, 1536mb) and Kubernetes quantities (2Gi, 512Mi)."""
    m = re.fullmatch(r"(\d+)\s*([kmg]i?b?)?", size.strip().lower())
    assert m, f"unreadable size {size!r}"
    unit = (m[2] or "").rstrip("b").rstrip("i")
    return int(m[1]) * 1024 ** " kmg".index(unit or " ")


def test_redis_caps_its_memory_and_never_evicts() -> None:
    """Evicting would drop queued tasks or job state; a full Redis must refuse writes."""
    argvs = redis_argvs()
    assert set(argvs) == {"compose", "k8s"}
    for source, argv in argvs.items():
        assert option(argv, "--maxmemory-policy", "--maxmemory-policy") == "noeviction", source
        cap = option(argv, "--maxmemory", "--maxmemory")
        assert cap and memory_bytes(cap) > 0, source
    ((_, container),) = [(w, c) for w, c in containers() if w["metadata"]["name"] == "redis"]
    limit = memory_bytes(container["resources"]["limits"]["memory"])
    assert memory_bytes(option(argvs["k8s"], "--maxmemory", "--maxmemory") or "0") < 0.8 * limit


def fake_redis_cli(tmp_path: Path, reply: str) -> dict[str, str]:
    """An environment whose `redis-cli` prints `reply` and exits 0, as the real one does on an
    error reply."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    cli = bin_dir / "redis-cli"
    cli.write_text(f"#!/bin/sh\nprintf '%s\\n' {shlex.quote(reply)}\n")
    cli.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def redis_readiness_commands() -> dict[str, Argv]:
    ((_, container),) = [(w, c) for w, c in containers() if w["metadata"]["name"] == "redis"]
    test = services()["redis"]["healthcheck"]["test"]
    compose_cmd = ["sh", "-c", test[1]] if test[0] == "CMD-SHELL" else test[1:]
    return {"k8s": container["readinessProbe"]["exec"]["command"], "compose": compose_cmd}


@pytest.mark.parametrize(
    ("reply", "ready"),
    [("PONG", True), ("LOADING Redis is loading the dataset in memory", False),
     ("NOAUTH Authentication required.", False), ("", False)],
)  # fmt: skip
def test_redis_readiness_fails_on_an_error_reply(tmp_path: Path, reply: str, ready: bool) -> None:
    env = fake_redis_cli(tmp_path, reply)
    for source, argv in redis_readiness_commands().items():
        done = subprocess.run(argv, env=env, capture_output=True, timeout=30)
        assert (done.returncode == 0) == ready, (source, reply)


# --- who the pods run as --------------------------------------------------------------------


def test_pods_run_as_a_numeric_non_root_user() -> None:
    dockerfile = (INFRA / "Dockerfile").read_text()
    image_users = set(re.findall(r"^USER (\d+)(?::\d+)?$", dockerfile, re.MULTILINE))
    assert image_users == {"10001"}, "every app image runs as the numeric user 10001"
    for w in (d for d in k8s_docs() if d["kind"] in WORKLOADS):
        name, spec = w["metadata"]["name"], pod_spec(w)
        pod = spec.get("securityContext", {})
        assert pod.get("runAsNonRoot") is True, name
        assert isinstance(pod.get("runAsUser"), int) and pod["runAsUser"] > 0, name
        for c in spec["containers"]:
            if "/atommem/" in c["image"]:
                assert str(pod["runAsUser"]) in image_users, name
            ctx = c.get("securityContext", {})
            assert ctx.get("allowPrivilegeEscalation") is False, (name, c["name"])
            assert "ALL" in ctx.get("capabilities", {}).get("drop", []), (name, c["name"])


# --- probes ---------------------------------------------------------------------------------


def test_api_probes_never_wait_on_a_queue_and_answer_within_their_timeout() -> None:
    from api.routes.health import REDIS_TIMEOUT_S  # the longest /readyz waits

    ((_, container),) = [(w, c) for w, c in containers() if w["metadata"]["name"] == "api"]
    ready, live = container["readinessProbe"], container["livenessProbe"]
    assert ready["httpGet"]["path"] == "/readyz"  # not ?deep=true: that one waits on a worker
    assert live["httpGet"]["path"] == "/healthz"
    assert ready.get("timeoutSeconds", 1) > REDIS_TIMEOUT_S


def celery_containers() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(w, c) for w, c in containers() if is_celery(k8s_argv(c))]


def test_workers_and_flower_have_liveness_and_readiness_probes() -> None:
    import flower.urls

    kinds = set()
    for w, c in celery_containers():
        name = w["metadata"]["name"]
        assert "livenessProbe" in c and "readinessProbe" in c, name
        if worker_queues(k8s_argv(c)):
            kinds.add("worker")
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                assert c[probe]["exec"]["command"][:3] == ["python", "-m", "workers.heartbeat"]
                assert c[probe].get("timeoutSeconds", 1) >= 3, (name, probe)  # starts Python
        else:
            kinds.add("flower")
            for probe in ("readinessProbe", "livenessProbe"):
                assert c[probe]["httpGet"]["path"] == "/healthcheck", name
    assert kinds == {"worker", "flower"}
    # Flower serves /healthcheck, and without its login (no tornado.web.authenticated wrapper).
    (check,) = [r for r in flower.urls.handlers if isinstance(r, tuple) and r[0] == "/healthcheck"]
    assert not hasattr(check[1].get, "__wrapped__")

    for name, svc in services().items():
        if is_celery(compose_argv(svc)):
            assert svc.get("healthcheck", {}).get("test"), name


def worker_probe_commands() -> list[Argv]:
    argvs = [
        c[probe]["exec"]["command"]
        for w, c in celery_containers()
        if worker_queues(k8s_argv(c))
        for probe in ("startupProbe", "readinessProbe", "livenessProbe")
    ]
    argvs += [
        svc["healthcheck"]["test"][1:]
        for svc in services().values()
        if worker_queues(compose_argv(svc))
    ]
    return argvs


def test_worker_probes_pass_on_a_fresh_heartbeat_only(tmp_path: Path) -> None:
    """The probe commands as written, run here: no file (not connected yet) and a stale file
    (a stuck consumer loop) fail; a fresh one passes."""
    beat = tmp_path / "atommem-worker.heartbeat"
    env = {**os.environ, "TMPDIR": str(tmp_path)}

    def passes(argv: Argv) -> bool:
        assert argv[0] == "python"
        done = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, env=env, timeout=60)
        return done.returncode == 0

    commands = {tuple(a) for a in worker_probe_commands()}
    assert len(commands) >= 2
    for argv in commands:
        max_age = float(option(list(argv), "--max-age", "--max-age") or "nan")
        beat.unlink(missing_ok=True)
        assert not passes(list(argv)), argv
        beat.touch()
        assert passes(list(argv)), argv
        stale = time.time() - max_age - 5
        os.utime(beat, (stale, stale))
        assert not passes(list(argv)), argv
