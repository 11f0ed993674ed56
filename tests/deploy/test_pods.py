"""How the deployed pods roll out and run, checked in infra/: images pinned to a release, GPU
rollouts that never surge, Redis's memory cap and readiness, numeric non-root users, and probes
that answer without a queue (the probe commands run, against stand-ins)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.deploy import (
    GPU_RESOURCE,
    INFRA,
    RELEASE,
    WORKLOADS,
    Argv,
    compose_argv,
    containers,
    env_example,
    image_problem,
    interpolate,
    is_celery,
    is_vllm_server,
    k8s_argv,
    k8s_docs,
    kustomization,
    option,
    pod_spec,
    services,
    worker_queues,
    workload_named,
)
from workers.launch import ROOT

pytestmark = pytest.mark.deploy

# --- rollouts and images ------------------------------------------------------------------


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
    assert workload_named("vllm")["spec"]["strategy"]["type"] == "Recreate"


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
    return int(m[1]) * int(1024 ** " kmg".index(unit or " "))


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
                assert c[probe]["exec"]["command"][:3] == ["python", "-m", "workers.probe"]
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


def test_worker_probes_pass_on_a_fresh_probe_file_only(tmp_path: Path) -> None:
    """The probe commands as written, run here: no file (not connected yet) and a stale file
    (a stuck consumer loop) fail; a fresh one passes."""
    alive = tmp_path / "atommem-worker.alive"
    env = {**os.environ, "TMPDIR": str(tmp_path)}

    def passes(argv: Argv) -> bool:
        assert argv[0] == "python"
        done = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, env=env, timeout=60)
        return done.returncode == 0

    commands = {tuple(a) for a in worker_probe_commands()}
    assert len(commands) >= 2
    for argv in commands:
        max_age = float(option(list(argv), "--max-age", "--max-age") or "nan")
        alive.unlink(missing_ok=True)
        assert not passes(list(argv)), argv
        alive.touch()
        assert passes(list(argv)), argv
        stale = time.time() - max_age - 5
        os.utime(alive, (stale, stale))
        assert not passes(list(argv)), argv
