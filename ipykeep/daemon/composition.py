"""The composition root: builds the engine and its collaborators, in the order they observe.

Nothing is discovered or installed by magic: the daemon (and in-process users such as tests
and benchmarks) call ``compose``, which attaches the staleness, checkpoint, inspection and
serving services to the engine as observers in that order (staleness records a cell before
anything reads the record: checkpoints read it to know what a cell wrote), and ``rpc_methods`` lists every service method the daemon serves beside the
engine's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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

    def rpc_methods(self) -> dict[str, Callable[..., Any]]:
        """Daemon methods served by the collaborators (RPC name -> bound method)."""
        return {
            "run_stale": self.staleness.run_stale,
            "watch_file": self.staleness.watch_file,
            "plan_progress": self.staleness.plan_progress,
            "inspect": self.inspection.inspect,
            "namespace": self.inspection.namespace,
            "serve": self.serve.serve,
            "unserve": self.serve.unserve,
            "publish": self.serve.publish,
            "checkpoint": self.checkpoints.checkpoint,
            "restore": self.checkpoints.restore,
            "checkpoints": self.checkpoints.checkpoints,
        }


def compose(paths: ProjectPaths, config: Config) -> Composition:
    engine = Engine(paths, config)
    staleness = StalenessService(engine)
    checkpoints = CheckpointService(engine)
    inspection = InspectionService(engine)
    serve = ServeService(engine)
    engine.attach(staleness, checkpoints, inspection, serve)
    return Composition(engine, staleness, checkpoints, inspection, serve)


def compose_for_daemon(
    paths: ProjectPaths, config: Config
) -> tuple[Engine, dict[str, Callable[..., Any]]]:
    """What ``core.daemon.Daemon`` needs: the engine and the extra RPC methods."""
    composition = compose(paths, config)
    return composition.engine, composition.rpc_methods()
