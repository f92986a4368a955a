"""Finding exporters by name: built-ins, plus plugins (`agentenv.exporters` entry points,
or `plugins.exporters = ["module:Class"]` in agentenv.toml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentenv.registry import Registry, RegistryError
from agentenv.rollout.exporters.base import Exporter, ExportError, ExportFilter
from agentenv.rollout.store import RolloutStore


def _named(cls: type[Exporter]) -> str:
    return getattr(cls, "name", getattr(cls, "__name__", "?"))


EXPORTERS: Registry[type[Exporter]] = Registry(
    kind="exporter", group="agentenv.exporters", config_key="exporters", name_of=_named
)


def get_exporter(name: str, **options: Any) -> Exporter:
    """An exporter by name, with its options; ExportError naming the known ones."""
    try:
        cls = EXPORTERS.get(name)
    except RegistryError as exc:
        raise ExportError(str(exc)) from None
    return cls(**options)


def export_run(
    run: str | Path | RolloutStore,
    exporter: Exporter | str,
    out: Any,
    *,
    where: ExportFilter | None = None,
) -> int:
    """Export a run folder's records (the last of each episode, filtered) with an exporter
    (by name or instance) to `out` (a stream, or a path); the number of documents written."""
    store = run if isinstance(run, RolloutStore) else RolloutStore(run)
    if not store.exists():
        raise ExportError(
            f"{store.folder} is not a rollout folder (no {store.path.name}); report and export read what "
            "`agent-env rollout` writes (`agent-env run` writes one folder per task instead)"
        )
    chosen = get_exporter(exporter) if isinstance(exporter, str) else exporter
    keep = where or ExportFilter()
    return chosen.write((r for r in store.records() if keep(r)), out)
