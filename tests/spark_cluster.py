"""Test helper: a Spark standalone cluster on 127.0.0.1, started from pyspark's own launcher.

:class:`StandaloneCluster` starts one master and ``workers`` workers, each a separate JVM run by
``<pyspark>/bin/spark-class`` (``org.apache.spark.deploy.master.Master``, ``...deploy.worker.Worker``),
each worker with ``cores`` cores and ``memory`` of executor memory, on free ports. :meth:`start` returns
once the master's web UI (``/json/``) lists every worker as ALIVE; :meth:`stop` kills the process group
of every JVM it started, and with it the executors and Python workers those JVMs started.

The processes get a clean environment: no ``PYTHONPATH``, their own working and work directories, so
nothing on the checkout's path reaches an executor by inheritance. Each worker keeps its executors'
logs under ``work_dir(i)/app-*/<executor>/stderr``. :meth:`kill_worker` SIGKILLs one worker with every
process below it, as a lost machine would lose them.

Nothing here imports Spark or the project, so the helper also works from a plain Python shell.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

#: Variables the cluster's JVMs must not inherit from the test process: a Python path would let an
#: executor import the project from the checkout; the others belong to the test's own driver.
_NOT_INHERITED = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT",
                  "PYSPARK_GATEWAY_SECRET", "SPARK_CONF_DIR", "VIRTUAL_ENV")


class ClusterError(RuntimeError):
    """The cluster could not be started or did not become ready."""


def pyspark_home() -> Path:
    """The directory of the installed pyspark package, which holds ``bin/spark-class`` and ``jars/``."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ClusterError("pyspark is not installed in this interpreter")
    return Path(spec.origin).parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without :data:`_NOT_INHERITED`, bound to loopback, plus ``extra``."""
    env = {key: value for key, value in os.environ.items() if key not in _NOT_INHERITED}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.update(extra)
    return env


@dataclass
class _Daemon:
    name: str
    process: subprocess.Popen
    log: Path


@dataclass
class StandaloneCluster:
    """One master and ``workers`` workers; use :meth:`start` / :meth:`stop` or a ``with`` block.

    ``master_url`` is ``spark://127.0.0.1:PORT`` once started; :meth:`state` is the master's JSON.
    """

    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    daemon_memory: str = "256m"
    startup_timeout_s: float = 180.0
    root: Path | None = None
    master_port: int = field(default=0, init=False)
    master_ui_port: int = field(default=0, init=False)
    _daemons: list[_Daemon] = field(default_factory=list, init=False, repr=False)
    _own_root: bool = field(default=False, init=False, repr=False)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.master_ui_port}"

    def work_dir(self, index: int) -> Path:
        """Where worker ``index`` runs its executors (``app-*/<executor>/stderr``)."""
        assert self.root is not None
        return self.root / f"worker-{index}" / "work"

    def executor_dirs(self, app_id: str) -> list[Path]:
        """Every executor directory of application ``app_id``, over all workers."""
        return sorted(path for index in range(self.workers)
                      for path in (self.work_dir(index) / app_id).glob("*") if path.is_dir())

    def state(self, timeout_s: float = 5.0) -> dict:
        """The master's state as its web UI serves it (``/json/``): workers, active and completed apps."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=timeout_s) as response:
            return json.load(response)

    def alive_workers(self) -> int:
        try:
            state = self.state()
        except (OSError, urllib.error.URLError, ValueError):
            return 0
        return sum(1 for worker in state.get("workers", ()) if worker.get("state") == "ALIVE")

    def start(self) -> StandaloneCluster:
        """Start the master, then the workers; wait until the master lists every worker as ALIVE.

        Raises:
            ClusterError: a JVM exited early, or the workers were not ALIVE within ``startup_timeout_s``.
        """
        if self._daemons:
            raise ClusterError("this StandaloneCluster is already running")
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="spark-standalone-"))
            self._own_root = True
        spark_class = str(pyspark_home() / "bin" / "spark-class")
        env = clean_environment(SPARK_DAEMON_MEMORY=self.daemon_memory)
        self.master_port, self.master_ui_port = free_port(), free_port()
        try:
            self._spawn("master", [spark_class, MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.master_port),
                                   "--webui-port", str(self.master_ui_port)], env)
            self._wait(lambda: self._master_ready(), "the master's web UI to answer")
            for index in range(self.workers):
                self.work_dir(index).mkdir(parents=True)
                self._spawn(f"worker-{index}",
                            [spark_class, WORKER_CLASS, "--host", "127.0.0.1", "--port", str(free_port()),
                             "--webui-port", str(free_port()), "--cores", str(self.cores), "--memory", self.memory,
                             "--work-dir", str(self.work_dir(index)), self.master_url], env)
            self._wait(lambda: self.alive_workers() == self.workers, f"{self.workers} ALIVE workers")
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, command: list[str], env: dict[str, str]) -> None:
        assert self.root is not None
        home = self.root / name
        home.mkdir(parents=True, exist_ok=True)
        log = home / "daemon.log"
        with open(log, "wb") as out:
            # A session of its own: stop() signals the whole group, executors and Python workers included.
            process = subprocess.Popen(command, cwd=home, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self._daemons.append(_Daemon(name, process, log))

    def _master_ready(self) -> bool:
        try:
            return self.state().get("status") == "ALIVE"
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def _wait(self, condition, what: str) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while not condition():
            for daemon in self._daemons:
                if daemon.process.poll() is not None:
                    raise ClusterError(f"{daemon.name} exited with code {daemon.process.returncode} while waiting "
                                       f"for {what}; its log ends with:\n{self.log_tail(daemon.name)}")
            if time.monotonic() > deadline:
                raise ClusterError(f"no {what} within {self.startup_timeout_s} s; logs under {self.root}")
            time.sleep(0.2)  # poll interval of the readiness check, not a wait for a condition

    def worker_pid(self, index: int) -> int:
        """The pid of worker ``index``'s JVM (``spark-class`` execs ``java``: the process :meth:`start` started)."""
        return self._daemon(f"worker-{index}").process.pid

    def kill_worker(self, index: int, timeout_s: float = 30.0) -> list[int]:
        """SIGKILL worker ``index``'s JVM and every process below it, as the loss of its machine would.

        Below a worker are its executors' JVMs and, below those, the Python daemons (each in a process group
        of its own) and the workers they fork. Killing the worker alone would leave its executors running,
        orphaned; so every process of the tree, and every process group it spans, gets SIGKILL. Returns once
        all of them have ended.

        Returns:
            The pids killed, the worker's JVM first.
        """
        daemon = self._daemon(f"worker-{index}")
        pids = [daemon.process.pid, *process_tree(daemon.process.pid)]
        groups = {group for group in map(_process_group, pids) if group > 0}
        for group in groups:
            _kill(os.killpg, group)
        for pid in pids:
            _kill(os.kill, pid)
        daemon.process.wait(timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        while any(_running(pid) for pid in pids):
            if time.monotonic() > deadline:
                raise ClusterError(f"processes of worker-{index} still running {timeout_s} s after SIGKILL: "
                                   f"{[pid for pid in pids if _running(pid)]}")
            time.sleep(0.05)  # poll interval of the exit check, not a wait for a condition
        return pids

    def _daemon(self, name: str) -> _Daemon:
        for daemon in self._daemons:
            if daemon.name == name:
                return daemon
        raise ClusterError(f"no {name} in this cluster")

    def log_tail(self, name: str, chars: int = 3000) -> str:
        for daemon in self._daemons:
            if daemon.name == name:
                return daemon.log.read_text(errors="replace")[-chars:]
        return ""

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM every started JVM's process group, SIGKILL what is left after ``grace_s``; remove the
        cluster's directory if this object created it."""
        daemons, self._daemons = list(reversed(self._daemons)), []
        for daemon in daemons:
            _signal_group(daemon.process, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for daemon in daemons:
            try:
                daemon.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            # The group may outlive its leader (an executor, a Python daemon): kill it either way.
            _signal_group(daemon.process, signal.SIGKILL)
            try:
                daemon.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        if self._own_root and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root, self._own_root = None, False

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def submitted_driver(submit_pid: int) -> int | None:
    """The Python driver `spark-submit` (pid `submit_pid`, the JVM) started: the process to signal."""
    children: list[int] = []
    for task in Path(f"/proc/{submit_pid}/task").glob("*"):   # a JVM starts processes from any of its threads
        try:
            children += map(int, (task / "children").read_text().split())
        except OSError:
            continue
    for child in children:
        try:
            if "streaming/driver.py" in Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace"):
                return child
        except OSError:
            continue
    return None


def _stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name (state first); empty once it has ended."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def process_tree(root: int) -> list[int]:
    """Every process below ``root`` (children, their children, ...), from ``/proc``.

    Cost: O(processes on the machine) per call; dominated by reading every ``/proc/PID/stat``.
    """
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if len(fields) > 1:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _process_group(pid: int) -> int:
    fields = _stat_fields(pid)
    return int(fields[2]) if len(fields) > 2 else -1


def _running(pid: int) -> bool:
    """``pid`` exists and is not a zombie (an orphan's zombie is reaped by init, not by this process)."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] != "Z"


def _kill(send: Callable[[int, int], None], target: int) -> None:
    try:
        send(target, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_group(process: subprocess.Popen, sig: signal.Signals) -> None:
    """Signal the process group ``process`` leads (it was started in a session of its own)."""
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
