"""The composition root: builds the engine and its services, and collects what they serve.

Nothing is discovered or installed by magic: the daemon (and in-process users such as tests
and benchmarks) call ``compose``, which attaches the staleness, checkpoint, inspection and
serving services to the engine as observers in that order (staleness records a cell before
anything reads the record: checkpoints read it to know what a cell wrote). ``bindings``
gathers the declared methods each of them serves, bound to the callables that serve them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ipykeep.api.spec import Bindings
from ipykeep.checkpoints.service import CheckpointService
from ipykeep.engine.engine import Engine
from ipykeep.inspection.service import InspectionService
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from ipykeep.serve.service import ServeService
from ipykeep.staleness.service import StalenessService


@dataclass(frozen=True)
class Composition:
    engine: Engine
    staleness: StalenessService
    checkpoints: CheckpointService
    inspection: InspectionService
    serve: ServeService

    def bindings(self) -> Bindings:
        """Every method the engine and its services serve (the daemon adds its own)."""
        return (
            *self.engine.bindings(),
            *self.staleness.bindings(),
            *self.inspection.bindings(),
            *self.serve.bindings(),
            *self.checkpoints.bindings(),
        )


def compose(paths: ProjectPaths, config: Config) -> Composition:
    engine = Engine(paths, config)
    staleness = StalenessService(engine)
    checkpoints = CheckpointService(engine)
    inspection = InspectionService(engine)
    serve = ServeService(engine)
    engine.attach(staleness, checkpoints, inspection, serve)
    return Composition(engine, staleness, checkpoints, inspection, serve)


def compose_for_daemon(paths: ProjectPaths, config: Config) -> tuple[Engine, Bindings]:
    """What ``ipykeep.daemon.server.Daemon`` needs: the engine and what it and its services
    serve."""
    composition = compose(paths, config)
    return composition.engine, composition.bindings()
