"""The deployment files in infra/ as data: the compose file, .env.example, the Kubernetes
manifests and kustomization, the command lines they run, and whether an image is pinned."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from workers.launch import ROOT

INFRA = ROOT / "infra"
COMPOSE_FILE = INFRA / "compose" / "docker-compose.yml"
ENV_EXAMPLE = INFRA / "compose" / ".env.example"
K8S = INFRA / "k8s"
KUSTOMIZATION = K8S / "kustomization.yaml"
WORKLOADS = {"Deployment", "StatefulSet"}
GPU_RESOURCE = "nvidia.com/gpu"

COMPOSE_VAR = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")
SCRIPT_VAR = re.compile(r"\$\{(ATOMMEM_[A-Z0-9_]+):-")
RELEASE = re.compile(r"\d+\.\d+\.\d+")  # a full version: `7` or `latest` floats

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


def in_profile(service: dict[str, Any], profile: str) -> bool:
    return profile in (service.get("profiles") or [])


def gpu_stack() -> dict[str, dict[str, Any]]:
    """The services of the full stack: all but the `cpu` profile's."""
    return {n: s for n, s in services().items() if not in_profile(s, "cpu")}


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
    docs: list[dict[str, Any]] = []
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


def workload_named(name: str) -> dict[str, Any]:
    (found,) = [w for w in k8s_docs() if w["kind"] in WORKLOADS and w["metadata"]["name"] == name]
    return found


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


# --- images -------------------------------------------------------------------------------


def image_problem(image: str) -> str | None:
    """Why `image` is not a registry-qualified, pinned reference; None when it is."""
    name, _, tag = image.rpartition(":")
    registry = image.split("/", 1)[0]
    if "/" not in image or not ("." in registry or ":" in registry or registry == "localhost"):
        return "names no registry"
    if not name or "/" in tag or not RELEASE.search(tag):
        return "has no pinned release tag"
    return None
