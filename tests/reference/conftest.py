"""Session hooks of the reference suite: report.md is assembled once every module has written
its section (report.py), by the controlling process when pytest-xdist runs workers."""
import report


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker; the controller assembles when all are done
    report.assemble()
