"""Session hooks of the reference suite: report.md is assembled once every module has written
its section (report.py), by the controlling process when pytest-xdist runs workers; and the
collector's heap frozen once the test modules are imported."""
import gc

import report


def pytest_collection_finish(session):
    # Importing the test modules loads torch, transformers, peft and deepspeed: a few million
    # objects that live to the end. Every full collection walked them all (about 0.3 s a call
    # here), and the measurements call gc.collect() and gc.get_objects() to find what a forward
    # left alive, several times a test. Frozen, those objects are skipped by both; what a test
    # creates is still collected and still listed.
    gc.collect()
    gc.freeze()


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker; the controller assembles when all are done
    report.assemble()


def pytest_unconfigure(config):
    # Back in the collector's generations before the interpreter ends, so that the bindings
    # that count their objects at exit (nanobind's) see them released.
    gc.unfreeze()
