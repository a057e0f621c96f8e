"""Sampling another Python process with py-spy (``bench proxy --profile``): :class:`Recording`
starts ``py-spy record --format raw --nonblocking --full-filenames`` on a process id and stops
it with SIGINT, which makes py-spy write its file of collapsed stacks (one line per distinct
stack: frames from the root to the leaf, ``;``-separated, then the number of samples; full file
names, since py-spy's short ones drop the package of a deep module); :func:`profiler_problem`
says in one line why it cannot run here (py-spy missing, no permission to attach: ptrace).

py-spy reads the target's memory from outside: nothing changes in the profiled process (no
import, no hook in LiteLLM). ``--nonblocking`` does not pause it at each sample (the stacks of a
sample may be torn now and then; the profile is a sum of thousands).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

#: samples per second (py-spy's ``--rate``)
RATE = 250
#: seconds py-spy has to attach (or fail) after it starts, and to write its file after SIGINT
ATTACH_S = 15.0
WRITE_S = 120.0


class ProfilerError(RuntimeError):
    """py-spy is missing, cannot attach, or wrote no profile: the message is one line."""


def py_spy_path() -> str | None:
    """py-spy beside this Python (a virtualenv's ``bin``), else on ``PATH``."""
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file():
        return str(beside)
    return shutil.which("py-spy")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def profiler_problem(timeout_s: float = 30.0) -> str | None:
    """Why py-spy cannot profile a process here, in one line, or None when it can: tried on a
    child Python that sleeps (``py-spy dump``), as the benchmark's proxy will be."""
    binary = py_spy_path()
    if binary is None:
        return "py-spy is not installed (pip install py-spy; it is in the dev extra)"
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.3)  # past the interpreter's start
        try:
            done = subprocess.run(
                [binary, "dump", "--pid", str(child.pid)],
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            return f"py-spy did not attach to a process within {timeout_s:.0f} s"
        except OSError as exc:
            return f"py-spy cannot run: {exc}"
        if done.returncode != 0:
            said = _last_line(done.stderr + "\n" + done.stdout)
            return f"py-spy cannot attach to a process here (ptrace permission?): {said}"
        return None
    finally:
        child.kill()
        child.wait()


class Recording:
    """``py-spy record`` of process ``pid`` into ``out`` (raw collapsed stacks), from
    :meth:`start` to :meth:`stop`; its own output goes to ``out`` + ``.log``."""

    def __init__(self, pid: int, out: Path, rate: int = RATE) -> None:
        self.pid = pid
        self.out = out
        self.rate = rate
        self.log = out.with_name(out.name + ".log")
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start py-spy and wait until it samples.

        Raises:
            ProfilerError: py-spy is missing, exited (it could not attach), or said nothing
                within :data:`ATTACH_S` seconds.
        """
        binary = py_spy_path()
        if binary is None:
            raise ProfilerError("py-spy is not installed (pip install py-spy)")
        self.out.unlink(missing_ok=True)
        command = [binary, "record", "--format", "raw", "--rate", str(self.rate)]
        command += ["--nonblocking", "--full-filenames", "--pid", str(self.pid)]
        command += ["-o", str(self.out)]
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + ATTACH_S
        while time.monotonic() < deadline:
            said = self.log.read_text(errors="replace")
            if self._process.poll() is not None:
                raise ProfilerError(f"py-spy could not profile the proxy: {_last_line(said)}")
            if "Sampling process" in said:
                return
            time.sleep(0.05)
        self._kill()
        raise ProfilerError(f"py-spy did not start sampling within {ATTACH_S:.0f} s")

    def stop(self) -> str:
        """Stop py-spy (SIGINT: it writes its file) and return the file's text.

        Raises:
            ProfilerError: py-spy ended with an error or wrote no file.
        """
        process = self._process
        if process is None:
            raise ProfilerError("py-spy was not started")
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=WRITE_S)
            except subprocess.TimeoutExpired:
                self._kill()
                raise ProfilerError(
                    f"py-spy did not write its profile within {WRITE_S:.0f} s"
                ) from None
        said = self.log.read_text(errors="replace")
        if process.returncode != 0 or not self.out.is_file():
            raise ProfilerError(f"py-spy wrote no profile: {_last_line(said)}")
        return self.out.read_text(errors="replace")

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def __enter__(self) -> Recording:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._kill()  # stopped by stop(); killed only when the phase failed


__all__ = ["RATE", "ProfilerError", "Recording", "profiler_problem", "py_spy_path"]
