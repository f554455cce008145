"""The container image, built from ``Dockerfile`` and run as it ships.

``scripts/build-image.sh`` builds it with buildah on a ``python:3.11-slim`` base made from Debian's packages (no image
registry is reachable here; ``scripts/test.sh`` runs the script's ``--prepare`` step before pytest). The tests run the
image with ``buildah run --isolation chroot``: that applies the image's user, working directory and environment and
shares the host's network, so the sidecar inside reads a real broker on 127.0.0.1 and the test reads its ``/metrics``.
``buildah run`` does not apply ENTRYPOINT and CMD: the tests read them from the image's config and run exactly them,
and stop the sidecar the way ``docker stop`` does, with the image's STOPSIGNAL sent to the entrypoint's process.

What they check: ``--help``, the README's ``demo`` (which needs the ``convert`` extra), and ``run`` against a broker
with a config mounted at the CMD's path, as the non-root user the image declares and with the state in its
working directory; and the HEALTHCHECK, kept by the docker image format, answering from inside the image.
What chroot isolation does not reproduce: a network namespace (the sidecar listens on the host's loopback, so the
tests set ``HARMONIC_METRICS__HOST=127.0.0.1``) and Kubernetes' read-only root filesystem. podman would, but its OCI
runtime cannot start a container on these machines (crun: ``setrlimit `RLIMIT_NOFILE`: Operation not permitted``).

Where the image cannot be built or run here (not root, no Debian mirror, no buildah), they fail with the reason and
the build log's tail: they are never skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import pytest
import yaml

from monitor import telemetry as tel
from tests.integration.brokers import CONSUMER_SESSION_TIMEOUT_MS, Broker, Kafka09Broker, free_port
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.sidecar import STOP_TIMEOUT_SECONDS, Sidecar, SidecarError
from tests.integration.test_run_kafka import DRAIN_TIMEOUT_SECONDS, MODEL, group_name, new_topic, produce, valid_events

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build-image.sh"
#: written by the build script: the containers-storage settings (driver, where the images are) every call here uses
STORAGE_CONF = Path(os.environ.get("HARMONIC_IMAGE_CACHE", REPO / ".cache" / "image")) / "storage.conf"
IMAGE = "localhost/harmonic-monitor:test"
#: the build is ~1 min on 2 idle cores (pip downloads and installs the dependencies); the first base tree ~1 min more
BUILD_TIMEOUT_SECONDS = 900.0
#: ``--help`` and the health command answer in seconds; the demo (30000 events) in well under a minute on 2 cores
RUN_TIMEOUT_SECONDS = 300.0
#: what the image declares (Dockerfile: USER, WORKDIR, ENTRYPOINT, CMD, EXPOSE)
USER = "10001:10001"
UID = 10001
WORKDIR = "/var/lib/harmonic"
CONFIG_PATH = "/etc/harmonic/monitor.yaml"
MODELS_DIR = "/models"
EVENTS = 200


class ImageError(AssertionError):
    """The image could not be built, inspected or run; the message says which command and shows its output."""


def buildah(*args: str, timeout: float = RUN_TIMEOUT_SECONDS) -> subprocess.CompletedProcess[str]:
    """Run ``buildah ARGS`` on the build script's storage; stdout and stderr together in ``stdout``."""
    try:
        return subprocess.run(
            ["buildah", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "CONTAINERS_STORAGE_CONF": str(STORAGE_CONF)},
        )
    except FileNotFoundError:
        raise ImageError(f"buildah not found; `bash {BUILD_SCRIPT.relative_to(REPO)}` installs it") from None


def checked(done: subprocess.CompletedProcess[str]) -> str:
    if done.returncode != 0:
        raise ImageError(f"{' '.join(map(str, done.args))} exited {done.returncode}:\n{done.stdout[-4000:]}")
    return done.stdout


@dataclass(frozen=True)
class ImageConfig:
    """The parts of the image's (docker format) config the tests run by."""

    user: str
    workdir: str
    entrypoint: list[str]
    cmd: list[str]
    exposed_ports: list[str]
    healthcheck: list[str]  # the ``Test`` list, e.g. ["CMD", "python", "-c", "..."]; [] when the image has none
    stop_signal: str


@dataclass(frozen=True)
class Container:
    """One buildah working container of the image, run as the image declares (user, workdir, environment)."""

    name: str
    config: ImageConfig

    def argv(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        volumes: Mapping[Path, str] | None = None,
    ) -> list[str]:
        """``buildah run`` of ``command`` with ``env`` added and ``volumes`` (host dir → container path) mounted."""
        options = ["--isolation", "chroot"]
        for key, value in (env or {}).items():
            options += ["--env", f"{key}={value}"]
        for host, inside in (volumes or {}).items():
            options += ["--volume", f"{host}:{inside}"]
        return ["run", *options, self.name, "--", *command]

    def run(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        volumes: Mapping[Path, str] | None = None,
        timeout: float = RUN_TIMEOUT_SECONDS,
    ) -> subprocess.CompletedProcess[str]:
        return buildah(*self.argv(command, env=env, volumes=volumes), timeout=timeout)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> ImageConfig:
    """Build the image from the working tree (so the test never runs a stale one) and read its config."""
    if os.geteuid() != 0:
        raise ImageError("building the image needs root (apt-get, mmdebstrap, buildah's storage); CI runs as root")
    log = tmp_path_factory.mktemp("image") / "build.log"
    started = time.monotonic()
    with log.open("w") as out:
        try:
            done = subprocess.run(
                ["bash", str(BUILD_SCRIPT), IMAGE],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=BUILD_TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ImageError(f"image build still running after {BUILD_TIMEOUT_SECONDS:.0f} s\n{tail(log)}") from None
    if done.returncode != 0:
        raise ImageError(f"`bash scripts/build-image.sh {IMAGE}` exited {done.returncode}\n{tail(log)}")
    print(f"image built in {time.monotonic() - started:.0f} s")
    inspected = json.loads(checked(buildah("inspect", "--type", "image", IMAGE)))
    config: dict[str, Any] = inspected["Docker"]["config"]
    return ImageConfig(
        user=config.get("User", ""),
        workdir=config.get("WorkingDir", ""),
        entrypoint=list(config.get("Entrypoint") or []),
        cmd=list(config.get("Cmd") or []),
        exposed_ports=sorted(config.get("ExposedPorts") or {}),
        healthcheck=list((config.get("Healthcheck") or {}).get("Test") or []),
        stop_signal=config.get("StopSignal", ""),
    )


@pytest.fixture(scope="module")
def container(image: ImageConfig) -> Iterator[Container]:
    """A working container of the image for this module's runs; removed at the end."""
    name = f"harmonic-monitor-test-{uuid.uuid4().hex[:8]}"
    checked(buildah("from", "--pull-never", "--name", name, IMAGE))
    try:
        yield Container(name, image)
    finally:
        buildah("rm", name)


def tail(path: Path, lines: int = 60) -> str:
    text = path.read_text(errors="replace") if path.exists() else f"({path} missing)"
    return "\n".join(text.splitlines()[-lines:])


def shared_dir(path: Path) -> Path:
    """``path`` made readable and writable by the image's user (pytest's temp dirs are root's, mode 0700)."""
    path.mkdir(parents=True, exist_ok=True)
    for parent in (path, *path.parents):
        if parent == Path(parent.anchor):
            break
        parent.chmod(parent.stat().st_mode | 0o711)  # let uid 10001 through to the mounted folder
    path.chmod(0o777)
    return path


# ---------------------------------------------------------------------------------------------- the sidecar


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    """Every process under ``pid``, parents before children."""
    tree, out, todo = _children(), [], [pid]
    while todo:
        kids = tree.get(todo.pop(0), [])
        out += kids
        todo += kids
    return out


def cmdline(pid: int) -> list[str]:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def uids(pid: int) -> set[int]:
    """Real, effective, saved and filesystem uid of ``pid`` (empty when it is gone)."""
    try:
        status = (Path("/proc") / str(pid) / "status").read_text()
    except OSError:
        return set()
    line = next(x for x in status.splitlines() if x.startswith("Uid:"))
    return {int(v) for v in line.split()[1:]}


class ImageSidecar(Sidecar):
    """``harmonic-monitor run`` inside the image: the image's ENTRYPOINT and CMD, configured as in compose.

    The CMD reads ``/etc/harmonic/monitor.yaml``, mounted here with the models; ``HARMONIC_*`` variables carry the
    broker, the topic and the port, as ``deploy/compose/docker-compose.yml`` passes them. The state goes where the
    image's working directory puts it. ``Sidecar``'s waits, scrapes and log tail work unchanged; start and stop are
    the container's.
    """

    def __init__(
        self, container: Container, broker: Broker, *, topic: str, config_dir: Path, models_dir: Path, log_path: Path
    ) -> None:
        group_id = group_name()
        super().__init__(broker, topic=topic, group_id=group_id, state_dir=Path(WORKDIR, "state"), log_path=log_path)
        self.container = container
        self.volumes = {config_dir: str(Path(CONFIG_PATH).parent), models_dir: MODELS_DIR}
        self.env = {
            "HARMONIC_KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap,
            "HARMONIC_KAFKA__TOPIC": topic,
            "HARMONIC_KAFKA__GROUP_ID": group_id,
            "HARMONIC_KAFKA__SESSION_TIMEOUT_MS": str(CONSUMER_SESSION_TIMEOUT_MS),
            "HARMONIC_METRICS__HOST": "127.0.0.1",  # the host's network: listen on loopback only
        }
        if broker.api_version is not None:
            self.env["HARMONIC_KAFKA__API_VERSION"] = ".".join(str(p) for p in broker.api_version)

    def start(self) -> Self:
        if self.running:
            raise SidecarError(f"sidecar already running (pid {self.pid})")
        self.port = free_port()
        self.env["HARMONIC_METRICS__PORT"] = str(self.port)
        command = [*self.container.config.entrypoint, *self.container.config.cmd]
        argv = ["buildah", *self.container.argv(command, env=self.env, volumes=self.volumes)]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap()
        self._log.write(f"\n==== starting: {' '.join(argv)}\n".encode())
        self._log.flush()
        self._process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "CONTAINERS_STORAGE_CONF": str(STORAGE_CONF)},
            start_new_session=True,  # kill() takes the whole group: buildah, its chroot helpers and the sidecar
        )
        return self

    def entrypoint_process(self) -> int:
        """Pid of the process the ENTRYPOINT started (PID 1 in a docker container): the first ``harmonic-monitor``."""
        for pid in descendants(self.pid):
            argv = cmdline(pid)
            if argv and not argv[0].startswith("buildah") and any(a.endswith("/harmonic-monitor") for a in argv[:2]):
                return pid
        raise SidecarError(self._message(f"no harmonic-monitor process under buildah (pid {self.pid})"))

    def stop(self) -> int:
        """``docker stop``: the image's STOPSIGNAL to the entrypoint's process; wait for the container to exit."""
        process = self._require_process()
        os.kill(self.entrypoint_process(), signal.Signals[self.container.config.stop_signal])
        try:
            code = process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill()
            raise SidecarError(self._message(f"no exit within {STOP_TIMEOUT_SECONDS:.0f} s of SIGTERM")) from None
        self._reap()
        return code

    def kill(self) -> int:
        process = self._require_process()
        with contextlib.suppress(ProcessLookupError):  # the group exited meanwhile
            os.killpg(process.pid, signal.SIGKILL)
        code = process.wait(timeout=10)
        self._reap()
        return code


# ---------------------------------------------------------------------------------------------- tests


def test_image_declares_its_user_entrypoint_port_and_healthcheck(image: ImageConfig) -> None:
    assert image.user == USER, "the Dockerfile's USER: the image must not run as root"
    assert image.workdir == WORKDIR
    assert image.entrypoint == ["harmonic-monitor"]
    assert image.cmd == ["run", "--config", CONFIG_PATH]
    assert image.exposed_ports == ["9108/tcp"]
    assert image.stop_signal == "SIGTERM"
    # kept because the build uses the docker format (the OCI format drops HEALTHCHECK)
    assert image.healthcheck[:2] == ["CMD", "python"], image.healthcheck


def test_image_help_runs_as_the_declared_user(container: Container) -> None:
    whoami = checked(container.run(["id", "-u"])).strip()
    assert whoami == str(UID)
    out = checked(container.run([*container.config.entrypoint, "--help"]))
    assert "usage: harmonic-monitor" in out
    for command in ("run", "demo", "convert", "score", "check-config"):
        assert command in out, f"`{command}` missing from --help"


def test_image_runs_the_demo(container: Container, tmp_path: Path) -> None:
    out_dir = shared_dir(tmp_path / "out")
    done = container.run(
        [
            *container.config.entrypoint,
            "demo",
            "--metrics-port",
            str(free_port()),
            "--summary-json",
            "/out/summary.json",
        ],
        volumes={out_dir: "/out"},
    )
    assert done.returncode == 0, f"demo in the image exited {done.returncode}:\n{done.stdout[-4000:]}"
    summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    assert [p["verdict"] for p in summary["phases"]] == ["stable", "input-shift", "harmful-shift"], done.stdout
    regressor = sum(p["regressor_error"]["events"] for p in summary["phases"])  # the demo's second model
    assert summary["events_scored"] == 30000 + regressor and summary["events_invalid"] == 0


def test_image_runs_against_a_broker_on_the_host(
    container: Container, kafka09_broker: Kafka09Broker, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    models = shared_dir(tmp_path / "models")
    for source in (classifier.onnx_path, classifier.reference_path):
        (models / source.name).write_bytes(source.read_bytes())
        (models / source.name).chmod(0o644)
    config_dir = shared_dir(tmp_path / "config")
    config = {
        "models": [
            {
                "name": MODEL,
                "path": f"{MODELS_DIR}/{classifier.onnx_path.name}",
                "reference": f"{MODELS_DIR}/{classifier.reference_path.name}",
                "version": "3",
            }
        ],
        "sampler": {"events_per_second": 0},  # score every event: the counts below are exact
    }
    (config_dir / "monitor.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (config_dir / "monitor.yaml").chmod(0o644)
    topic = new_topic(kafka09_broker, "image")
    batch = valid_events(classifier, EVENTS, prefix="img")
    produce(kafka09_broker, topic, batch.messages)

    sidecar = ImageSidecar(
        container,
        kafka09_broker,
        topic=topic,
        config_dir=config_dir,
        models_dir=models,
        log_path=tmp_path / "sidecar.log",
    )
    health = container.config.healthcheck[1:]
    health_env = {"HARMONIC_METRICS__PORT": ""}
    with sidecar:
        sidecar.wait_ready()
        s = sidecar.wait_for_metrics(
            lambda s: s.total(tel.EVENTS_SCORED_TOTAL.name, model=MODEL) >= EVENTS,
            f"{EVENTS} events scored",
            DRAIN_TIMEOUT_SECONDS,
        )
        # every process in the container runs as the image's user, not as root
        main = sidecar.entrypoint_process()
        inside = {p: uids(p) for p in descendants(sidecar.pid) if cmdline(p)[:1] != ["buildah-chroot-runtime"]}
        assert uids(main) == {UID}, f"the entrypoint runs as {uids(main)}, not as the image's user {UID}"
        assert all(u == {UID} for u in inside.values() if u), {p: (cmdline(p)[:3], u) for p, u in inside.items()}
        # the HEALTHCHECK command, run inside the image with the container's environment, sees a healthy sidecar
        health_env["HARMONIC_METRICS__PORT"] = str(sidecar.port)
        healthy = container.run(health, env=health_env)
        assert healthy.returncode == 0, f"HEALTHCHECK failed on a running sidecar:\n{healthy.stdout}"
        code = sidecar.stop()
    log = sidecar.log_tail()
    assert code == 0, f"exit status {code} after SIGTERM\n{log}"
    assert s.total(tel.EVENTS_CONSUMED_TOTAL.name, model=MODEL) == EVENTS
    assert s.total(tel.EVENTS_SCORED_TOTAL.name, model=MODEL) == EVENTS
    # ... and sees an unhealthy one once it is gone
    assert container.run(health, env=health_env).returncode != 0, "HEALTHCHECK passed with no sidecar running"
    # the default state_dir ("state") landed in the image's working directory, written by the image's user
    owner = checked(container.run(["stat", "-c", "%u", f"{WORKDIR}/state/state.json"])).strip()
    assert owner == str(UID), log
