"""Runs a Python script as a fresh `python script.py` would, in a process forked from one that
has already imported torch, transformers, peft and the measurement modules.

The suite runs scripts in processes of their own: the exported training scripts' dry runs
(test_export.py) and the FSDP measurements with PyTorch's fake process group (test_fsdp.py),
which must not share a process group, a profiler or global state with the tests. Each paid
5 to 8 s of imports before doing 1 to 7 s of work. Here a `multiprocessing` fork server imports
those modules once per pytest worker (forkserver_preload.py), and each script runs in a child
forked from it: a new process with its own globals, where the script's `import torch` finds the
module loaded. What the script does is unchanged: it runs as `__main__` with its own argv,
environment, working directory and standard output.
"""
import multiprocessing
import os
import pathlib
import runpy
import subprocess
import sys
import tempfile
import traceback

_CONTEXT = None


def _context():
    global _CONTEXT
    if _CONTEXT is None:
        import multiprocessing.forkserver

        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["forkserver_preload"])
        # The server is a new interpreter that finds its preload module on PYTHONPATH (Python
        # 3.11's server does not apply the sys.path it is handed before it imports them).
        here = str(pathlib.Path(__file__).parent)
        before = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, before) if p)
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            if before is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = before
        _CONTEXT = context
    return _CONTEXT


def _child(script, argv, env, cwd, out_path, err_path):
    """In the forked child: the script as `__main__`, its output in two files, its exit code
    as the process's."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.path[0:0] = [str(pathlib.Path(script).parent)]
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.argv = [str(script), *argv]
    code = 0
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        # As the interpreter exits: None is 0, an int is itself, anything else is printed and 1.
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(script, argv=(), env=None, cwd=None, timeout=600, check=False):
    """`subprocess.run([sys.executable, script, *argv], capture_output=True, text=True, ...)`,
    forked from the prewarmed server: a CompletedProcess with the exit code and both outputs."""
    cwd = pathlib.Path(cwd or os.getcwd())
    env = dict(os.environ if env is None else env)
    with tempfile.TemporaryDirectory() as tmp:
        out_path, err_path = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        p = _context().Process(target=_child, args=(str(script), list(argv), env, str(cwd), out_path, err_path))
        p.start()
        p.join(timeout)
        if p.is_alive():
            p.kill()
            p.join()
            raise subprocess.TimeoutExpired([sys.executable, str(script), *argv], timeout)
        stdout = pathlib.Path(out_path).read_text() if os.path.exists(out_path) else ""
        stderr = pathlib.Path(err_path).read_text() if os.path.exists(err_path) else ""
    done = subprocess.CompletedProcess([sys.executable, str(script), *argv], p.exitcode, stdout, stderr)
    if check:
        done.check_returncode()
    return done
